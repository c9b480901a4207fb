#include "common/spec/adapter_rules.h"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace vramlab::spec_rules {

namespace {

struct TargetNames {
  const char* module;
  const char* short_name;
};
constexpr TargetNames kTargetNames[kNumAdapterTargets] = {
    {"q_proj", "q"},       {"k_proj", "k"},   {"v_proj", "v"},      {"o_proj", "o"},
    {"gate_proj", "gate"}, {"up_proj", "up"}, {"down_proj", "down"}};

}  // namespace

const char* AdapterTargetModuleName(int target) {
  return target >= 1 && target <= kNumAdapterTargets ? kTargetNames[target - 1].module : "";
}

const char* AdapterTargetShortName(int target) {
  return target >= 1 && target <= kNumAdapterTargets ? kTargetNames[target - 1].short_name : "";
}

int64_t MaxAdapterRank(int64_t hidden_size, int64_t intermediate_size, int64_t num_attention_heads,
                       int64_t num_key_value_heads, const std::vector<int>& targets) {
  const int64_t kv_width = num_key_value_heads * (hidden_size / num_attention_heads);
  // min(in, out) of q, k, v, o, gate, up, down.
  const int64_t smaller_side[kNumAdapterTargets] = {hidden_size,
                                                    std::min(hidden_size, kv_width),
                                                    std::min(hidden_size, kv_width),
                                                    hidden_size,
                                                    std::min(hidden_size, intermediate_size),
                                                    std::min(hidden_size, intermediate_size),
                                                    std::min(hidden_size, intermediate_size)};
  int64_t max_rank = INT64_MAX;
  for (int t = 1; t <= kNumAdapterTargets; ++t) {
    const bool wrapped =
        targets.empty() || std::find(targets.begin(), targets.end(), t) != targets.end();
    if (wrapped) max_rank = std::min(max_rank, smaller_side[t - 1]);
  }
  return max_rank;
}

std::string AdapterRankMessage(int64_t rank, int64_t max_rank) {
  return "must be at most " + std::to_string(max_rank) +
         " (min(in_features, out_features) of a wrapped layer), got " + std::to_string(rank);
}

}  // namespace vramlab::spec_rules
