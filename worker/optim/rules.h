// Factories of the UpdateRules behind each OptimizerKind. Internal to worker/optim.
#ifndef VRAMLAB_WORKER_OPTIM_RULES_H_
#define VRAMLAB_WORKER_OPTIM_RULES_H_

#include <cstddef>
#include <memory>

#include "worker/optim/adamw_math.h"
#include "worker/optim/optimizer.h"
#include "worker/optim/update_rule.h"

namespace vramlab::worker::optim_internal {

AdamWHyper HyperFrom(const OptimizerOptions& options);

// The rule of options.kind; throws std::invalid_argument on an unknown kind.
std::unique_ptr<UpdateRule> MakeRule(const OptimizerOptions& options, size_t num_params);

// AdamW with exp_avg and exp_avg_sq in the parameter dtype: 2 x param dtype bytes per element.
std::unique_ptr<UpdateRule> MakeAdamWRule(const OptimizerOptions& options, size_t num_params);
// AdamW on an fp32 master copy with fp32 moments; the parameter receives the rounded master:
// 12 bytes per element.
std::unique_ptr<UpdateRule> MakeAdamWMasterRule(const OptimizerOptions& options, size_t num_params);
// SGD with momentum (torch.optim.SGD, dampening 0, no Nesterov); buffer in the parameter dtype.
std::unique_ptr<UpdateRule> MakeSgdRule(const OptimizerOptions& options, size_t num_params);
// AdamW with both moments block-wise quantized to 8 bits (see adamw_8bit_rule.cc). On CUDA it runs
// the fused kernel where the build has it, unless `allow_fused_kernel` is false (tests compare the
// two).
std::unique_ptr<UpdateRule> MakeAdamW8bitRule(const OptimizerOptions& options, size_t num_params,
                                              bool allow_fused_kernel = true);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_RULES_H_
