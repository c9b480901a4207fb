// The rules of a spec's parallel settings that span fields (sharding x world size, what only
// SHARD_FULL may set, a sweep's points run one gang each), with the words each refusal uses. The
// world size's range is spec_ranges.h's kWorldSize; the optimizer modes a parallel run refuses are
// optimizer_rules.h's. Dependency-free.
#ifndef VRAMLAB_COMMON_SPEC_PARALLEL_RULES_H_
#define VRAMLAB_COMMON_SPEC_PARALLEL_RULES_H_

namespace vramlab::spec_rules {

// parallel.sharding other than SHARD_NONE needs world_size >= 2.
inline constexpr const char* kShardingField = "parallel.sharding";
inline constexpr const char* kShardingNeedsRanksMessage =
    "sharding needs parallel.world_size >= 2 (one process holds everything)";
// parallel.reshard_after_forward frees gathered parameters, and parallel.prefetch (unset: true, as
// FSDP2) gathers the next unit while one runs; only SHARD_FULL gathers. Either away from its
// default with another sharding is refused with kFullShardingOnlyMessage.
inline constexpr const char* kReshardAfterForwardField = "parallel.reshard_after_forward";
inline constexpr const char* kPrefetchField = "parallel.prefetch";
inline constexpr bool kDefaultPrefetch = true;
inline constexpr const char* kFullShardingOnlyMessage = "applies to SHARD_FULL only";
// A parallel spec with a sweep: the daemon runs each point as its own gang of ranks, each rank
// told the point with --sweep-point INDEX:VALUE (common/spec/sweep_order.h). A rank started
// without it refuses the sweep with these words, naming `sweep`: within one gang, a point that
// ends one rank out of memory would leave the others waiting in a collective.
inline constexpr const char* kSweepField = "sweep";
inline constexpr const char* kParallelSweepNeedsPointMessage =
    "a parallel run's ranks run one point of a sweep, named with --sweep-point INDEX:VALUE (the "
    "daemon runs each point as its own gang of ranks)";

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_PARALLEL_RULES_H_
