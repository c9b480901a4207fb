// The rules of a spec's training.adapter beyond its ranges (spec_ranges.h): the layers an adapter
// may wrap and their names, and the largest rank the wrapped layers allow. Dependency-free.
#ifndef VRAMLAB_COMMON_SPEC_ADAPTER_RULES_H_
#define VRAMLAB_COMMON_SPEC_ADAPTER_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vramlab::spec_rules {

// The linear layers an adapter may wrap, in proto AdapterTarget order (value = index + 1).
inline constexpr int kNumAdapterTargets = 7;
// PEFT's module names: "q_proj", ..., "down_proj".
const char* AdapterTargetModuleName(int target);
// The short names the CLI takes: "q", "k", "v", "o", "gate", "up", "down".
const char* AdapterTargetShortName(int target);

// The largest rank every wrapped layer allows: min(in_features, out_features) over the targets
// (proto AdapterTarget values; empty means all seven) of a Qwen2 decoder with these shapes.
int64_t MaxAdapterRank(int64_t hidden_size, int64_t intermediate_size, int64_t num_attention_heads,
                       int64_t num_key_value_heads, const std::vector<int>& targets);

// "must be at most MAX (min(in_features, out_features) of a wrapped layer), got RANK".
std::string AdapterRankMessage(int64_t rank, int64_t max_rank);

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_ADAPTER_RULES_H_
