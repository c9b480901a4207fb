// The rules of a spec's optimizer modes that span fields (a delayed update x offload, in-backward
// and a parallel run), with the words each refusal uses. Dependency-free.
#ifndef VRAMLAB_COMMON_SPEC_OPTIMIZER_RULES_H_
#define VRAMLAB_COMMON_SPEC_OPTIMIZER_RULES_H_

namespace vramlab::spec_rules {

// training.optimizer.delayed_update delays the offloaded host step by one optimizer step: it needs
// offload_to_cpu, excludes in_backward, and a parallel run (whose ranks average gradients before an
// update) refuses it. The daemon and the worker refuse each case with these words.
inline constexpr const char* kDelayedUpdateField = "training.optimizer.delayed_update";
inline constexpr const char* kDelayedUpdateNeedsOffloadMessage =
    "delays the offloaded host step; set training.optimizer.offload_to_cpu";
inline constexpr const char* kDelayedUpdateWithInBackwardMessage =
    "excludes training.optimizer.in_backward (an in-backward update applies each gradient at once)";
inline constexpr const char* kDelayedUpdateParallelMessage =
    "not supported with parallel.world_size >= 2 (the ranks average each gradient before its "
    "update)";
// training.optimizer.in_backward applies each gradient as backward produces it; a parallel run
// averages it over the ranks first.
inline constexpr const char* kInBackwardField = "training.optimizer.in_backward";
inline constexpr const char* kInBackwardParallelMessage =
    "a parallel run averages each gradient over the ranks before the update; an in-backward update "
    "would apply it first";

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_OPTIMIZER_RULES_H_
