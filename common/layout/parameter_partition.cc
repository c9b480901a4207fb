#include "common/layout/parameter_partition.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace vramlab::layout {

std::vector<int> PartitionParameters(const std::vector<int64_t>& numels, int world_size) {
  if (world_size < 1) throw std::invalid_argument("PartitionParameters: world_size must be >= 1");
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<int64_t> load(static_cast<size_t>(world_size), 0);
  std::vector<int> owner(numels.size(), 0);
  for (size_t index : order) {
    // min_element returns the first of equal loads: the lowest rank.
    const auto least = std::min_element(load.begin(), load.end());
    owner[index] = static_cast<int>(least - load.begin());
    *least += numels[index];
  }
  return owner;
}

}  // namespace vramlab::layout
