#include "server/estimate/parallel_buffers.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/spec_rules.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server::estimate {

ShardingUnits UnitsOf(const RunSettings& run) {
  // ParameterTensorElements' order: embed_tokens, the layers, then the final norm and
  // (untied) lm_head. Every layer is alike, so layer 0's tensors stand for each.
  const std::vector<int64_t> tensors = ParameterTensorElements(run.model);
  const size_t layer_end = LayerTensorBegin(run.model.num_layers);
  ShardingUnits units;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t bytes = AllocatedBytes(run.device, tensors[t] * run.dtype_bytes);
    if (t == 0 || t >= layer_end) {
      units.root_bytes += bytes;
    } else if (t < LayerTensorBegin(1)) {
      units.layer_bytes += bytes;
    }
  }
  return units;
}

void AddParallelBuffers(const RunSettings& run, ParameterState* params) {
  const ParallelSettings& par = run.parallel;
  params->gathered_parameters = 0;
  params->communication_buffer = 0;
  if (!par.parallel()) return;
  if (!par.shards_gradients()) {
    params->communication_buffer = std::min(kAllReduceBucketBytes, params->all_gradients);
    return;
  }
  const ShardingUnits units = UnitsOf(run);
  params->communication_buffer = units.root_bytes + units.layer_bytes;
  if (par.shards_parameters()) {
    const int64_t layers_gathered =
        par.reshard_after_forward ? std::min<int64_t>(2, run.model.num_layers)
                                  : run.model.num_layers;
    params->gathered_parameters = units.root_bytes + layers_gathered * units.layer_bytes;
  }
}

std::string ParallelNote(const RunSettings& run) {
  const ParallelSettings& par = run.parallel;
  std::string layout;
  if (par.shards_parameters()) {
    layout = absl::StrCat("parameters, gradients and optimizer state are sharded 1/",
                          par.world_size, " per tensor; the root unit (embeddings, final norm, "
                          "lm_head) stays gathered through forward and backward, and ",
                          par.reshard_after_forward ? "two decoder layers (running, prefetched)"
                                                    : "all decoder layers (no reshard after "
                                                      "forward)",
                          " are gathered at once; in flight to reduce-scatter: the root's and "
                          "one layer's full gradients");
  } else if (par.shards_gradients()) {
    layout = absl::StrCat("gradients and optimizer state are sharded 1/", par.world_size,
                          " per tensor; in flight to reduce-scatter: the root's and one "
                          "layer's full gradients");
  } else {
    layout = absl::StrCat(par.shards_optimizer_state()
                              ? absl::StrCat("optimizer state is sharded 1/", par.world_size,
                                             " per tensor; ")
                              : "every rank holds all model states; ",
                          "gradients all-reduced in buckets of ", kAllReduceBucketBytes / kMiB,
                          " MiB, one in flight");
  }
  return absl::StrCat("per rank (world size ", par.world_size, ", ",
                      spec_rules::kShardingNames[par.sharding - 1], "): ", layout,
                      "; activations are one rank's micro-batch, as in one process");
}

}  // namespace vramlab::server::estimate
