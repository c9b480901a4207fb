// The ranks of a parallel (multi-process data-parallel) run as text: where they ran, each rank's
// anatomy side by side with the whole job, and the rank that decided a failed run. Every function
// here reads the Experiment alone (Experiment.slots, .ranks, .deciding_rank, spec.parallel).
#ifndef VRAMLAB_CLIENT_RANK_VIEWS_H_
#define VRAMLAB_CLIENT_RANK_VIEWS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::client {

// Whether `experiment` is a parallel run: spec.parallel.world_size >= 2, or the daemon gave it
// more than one slot or any rank result. One-process runs are shown exactly as before ranks.
bool IsParallel(const vramlab::v1::Experiment& experiment);

// The world size: spec.parallel.world_size, or the number of slots or ranks where larger; 1 for
// a one-process run.
int WorldSize(const vramlab::v1::Experiment& experiment);

// "2×[0,1]": world size × the slots, rank r on the r-th; "2×[-]" before the daemon gave slots.
std::string WorldAndSlots(const vramlab::v1::Experiment& experiment);

// "none", "optimizer", "gradients", "full", "full+reshard": the spec's sharding, short.
std::string ShardingName(const vramlab::v1::ParallelSpec& parallel);

// A category's bytes in an anatomy.
using AnatomyBytes = std::function<int64_t(const vramlab::v1::MemoryAnatomy&)>;

// One row of the per-rank view: a label and its bytes in a rank's anatomy.
struct RankRow {
  const char* label;
  int64_t (*bytes)(const vramlab::v1::MemoryAnatomy&);
};
// peak allocated, peak reserved, weights, gradients, optimizer state, activations, gathered
// parameters, communication buffers, outside the allocator (the anatomy's cuda_context_bytes).
const std::vector<RankRow>& RankRows();

// A rank's bytes for `label` (a RankRows() or AnatomyComponents() label, or "peak device used"):
// from its final report; for a rank that ran out of memory before any report, its peak allocated
// and reserved up to the failure and nothing else. nullopt where the rank does not tell.
std::optional<int64_t> RankBytes(const vramlab::v1::RankResult& rank, const std::string& label,
                                 const AnatomyBytes& bytes);

// The largest value of `label` over the run's ranks (the per-rank peak a parallel run is compared
// by); nullopt when no rank tells it.
std::optional<int64_t> MaxOverRanks(const vramlab::v1::Experiment& experiment,
                                    const std::string& label, const AnatomyBytes& bytes);

// The rank with the largest peak allocated among those with a final report (whose moments at the
// peak a comparison shows); null when none has one.
const vramlab::v1::RankResult* PeakRank(const vramlab::v1::Experiment& experiment);

// "fits", "OOM in backward (step 0, micro-step 1)", or the rank's state reason; "-" while the
// rank has not ended.
std::string RankOutcome(const vramlab::v1::RankResult& rank);

// "deciding rank: 1 on slot 1: OOM in backward (step 0, micro-step 1)"; empty when the run has no
// deciding rank.
std::string DecidingRankLine(const vramlab::v1::Experiment& experiment);

// "ranks: world size 2, sharding full, slots 2×[0,1]": what heads the per-rank table.
std::string RankSectionTitle(const vramlab::v1::Experiment& experiment);

// The per-rank table as cells, for the text and HTML views alike: a column per rank 0..world-1
// (a rank not yet ended has "-" cells), then "sum over ranks" ("≥ X" where some rank does not
// tell, a lower bound), "max per rank" and, with a per-rank prediction, "predicted per rank".
// Rows: slot, result ("fits", "OOM", "ended", "running"), then RankRows(). Notes: what "≥" means
// where used, each rank's outcome where it did not end with a report alone, DecidingRankLine().
struct RankTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // without trailing newlines
};
RankTable BuildRankTable(const vramlab::v1::Experiment& experiment);

// The `show` / `report` section of a parallel run: a header line (world size, sharding, slots),
// then BuildRankTable() as an aligned text table and its notes. Empty for a one-process run.
std::string RenderRankSection(const vramlab::v1::Experiment& experiment);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_RANK_VIEWS_H_
