// Every subject's rules of the experiment spec, for a caller that reads many of them (the CLI's
// flags and descriptions). A caller of one subject includes that subject's header instead:
//   spec_ranges.h      defaults of unset fields, ranges of set ones, string sizes
//   adapter_rules.h    the layers an adapter wraps and the rank they allow
//   allocator_conf.h   memory.allocator: its `extra` and the allocator's configuration string
//   optimizer_rules.h  the delayed update and the in-backward update across fields
//   parallel_rules.h   sharding, SHARD_FULL's settings and sweeps across ranks
//   device_rules.h     what needs a CUDA device (fused kernels, FLOAT16)
// The rulebook that applies them all is resolve_spec.h.
#ifndef VRAMLAB_COMMON_SPEC_SPEC_RULES_H_
#define VRAMLAB_COMMON_SPEC_SPEC_RULES_H_

#include "common/spec/adapter_rules.h"
#include "common/spec/allocator_conf.h"
#include "common/spec/device_rules.h"
#include "common/spec/optimizer_rules.h"
#include "common/spec/parallel_rules.h"
#include "common/spec/spec_ranges.h"

#endif  // VRAMLAB_COMMON_SPEC_SPEC_RULES_H_
