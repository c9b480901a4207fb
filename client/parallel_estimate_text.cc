#include "client/parallel_estimate_text.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/byte_size.h"
#include "client/describe.h"
#include "client/fit_verdict_text.h"
#include "client/text_table.h"

namespace vramlab::client {

using vramlab::v1::MemoryEstimate;

MemoryEstimate RankAsEstimate(const MemoryEstimate& estimate) {
  if (!estimate.has_parallel()) return estimate;
  const vramlab::v1::ParallelEstimate& rank = estimate.parallel();
  MemoryEstimate as_estimate;
  *as_estimate.mutable_anatomy() = rank.anatomy();
  as_estimate.set_predicted_peak_bytes(rank.predicted_peak_bytes());
  as_estimate.set_peak_phase(rank.peak_phase());
  as_estimate.set_limit_bytes(estimate.limit_bytes());
  as_estimate.set_verdict(rank.verdict());
  as_estimate.set_fits(rank.verdict() == vramlab::v1::FITS);
  as_estimate.set_reserved_low_bytes(rank.reserved_low_bytes());
  as_estimate.set_reserved_high_bytes(rank.reserved_high_bytes());
  as_estimate.set_margin_bytes(rank.margin_bytes());
  as_estimate.set_deciding_phase(rank.deciding_phase());
  *as_estimate.mutable_points() = rank.points();
  as_estimate.set_predicted_first_oom_value(rank.predicted_first_oom_value());
  as_estimate.set_predicted_search_fits_up_to(rank.predicted_search_fits_up_to());
  as_estimate.set_predicted_search_not_ruled_out_up_to(rank.predicted_search_not_ruled_out_up_to());
  return as_estimate;
}

std::string RenderParallelEstimate(const MemoryEstimate& estimate) {
  if (!estimate.has_parallel()) return "";
  const vramlab::v1::ParallelEstimate& rank = estimate.parallel();
  const vramlab::v1::MemoryAnatomy& one = estimate.anatomy();
  const vramlab::v1::MemoryAnatomy& per = rank.anatomy();
  std::string out = absl::StrCat(
      "per rank, world size ", rank.world_size(), ", ", rank.sharding(),
      rank.reshard_after_forward() ? ", reshard after forward" : "",
      rank.sharding() == "SHARD_FULL" && rank.has_prefetch() && !rank.prefetch() ? ", no prefetch"
                                                                                 : "",
      ":\n");
  TextTable table({"", "one process", "per rank"},
                  {TextTable::Align::kLeft, TextTable::Align::kRight, TextTable::Align::kRight});
  auto row = [&](const char* name, int64_t single, int64_t ranked) {
    table.AddRow({name, FormatBytes(single), FormatBytes(ranked)});
  };
  row("weights",
      one.weights_bytes() + one.adapter_weights_bytes() + one.quantization_constants_bytes(),
      per.weights_bytes() + per.adapter_weights_bytes() + per.quantization_constants_bytes());
  row("gradients", one.gradients_bytes(), per.gradients_bytes());
  row("optimizer state", one.optimizer_state_bytes(), per.optimizer_state_bytes());
  row("activations", one.activations_bytes(), per.activations_bytes());
  row("gathered parameters", 0, rank.gathered_parameters_bytes());
  row("communication buffer", 0, rank.communication_buffer_bytes());
  row("peak allocated", estimate.predicted_peak_bytes(), rank.predicted_peak_bytes());
  absl::StrAppend(&out, table.Render());
  absl::StrAppend(&out, "per-rank peak in ", PhaseName(rank.peak_phase()), "\n");
  if (estimate.limit_bytes() > 0) {
    // The rank's verdict, worded as the one-process one.
    absl::StrAppend(&out, "per rank ", VerdictLine(RankAsEstimate(estimate)), "\n");
  }
  if (rank.searched_up_to() > 0) {
    const std::string answer = rank.smallest_world_size_that_fits() > 0
                                   ? absl::StrCat(rank.smallest_world_size_that_fits())
                                   : absl::StrCat("none up to ", rank.searched_up_to());
    absl::StrAppend(&out, "smallest world size that fits ", FormatBytes(estimate.limit_bytes()),
                    " with ", rank.sharding(), ": ", answer, "\n");
  }
  return out;
}

}  // namespace vramlab::client
