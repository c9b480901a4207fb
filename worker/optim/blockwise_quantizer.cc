#include "worker/optim/blockwise_quantizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vramlab::worker::optim_internal {
namespace {

constexpr int kMaxExponentBits = 7;
constexpr int kTotalBits = 8;

// Midpoints of `count` evenly spaced boundaries over [0.1, 1]: the mantissas of one decade.
std::vector<double> DecadeMeans(int count) {
  std::vector<double> boundaries(count + 1);
  for (int i = 0; i <= count; ++i) boundaries[i] = 0.1 + 0.9 * i / count;
  std::vector<double> means(count);
  for (int i = 0; i < count; ++i) means[i] = (boundaries[i] + boundaries[i + 1]) / 2.0;
  return means;
}

// Views `flat` (length n, first element at a block boundary) as rows of kQuantBlockSize plus one
// shorter tail row, so per-block reductions are per-row reductions. Returns 1 or 2 row views.
std::vector<torch::Tensor> BlockRows(const torch::Tensor& flat) {
  const int64_t n = flat.numel();
  const int64_t full = n / kQuantBlockSize * kQuantBlockSize;
  std::vector<torch::Tensor> rows;
  if (full > 0) rows.push_back(flat.narrow(0, 0, full).view({-1, kQuantBlockSize}));
  if (n > full) rows.push_back(flat.narrow(0, full, n - full).view({1, -1}));
  return rows;
}

}  // namespace

std::vector<float> DynamicMapValues(bool is_signed) {
  // Decade i (scale 10^(i-6)) gets 2^i mantissas for the signed map (then mirrored) and 2^(i+1)
  // for the unsigned one; with 0 and 1 that makes exactly 256 values.
  const int non_sign_bits = kTotalBits - 1;
  std::vector<double> data;
  for (int i = 0; i < kMaxExponentBits; ++i) {
    const int exponent = i + non_sign_bits - kMaxExponentBits;
    const int fraction_items = is_signed ? (1 << exponent) : (1 << (exponent + 1));
    const double scale = std::pow(10.0, -(kMaxExponentBits - 1) + i);
    for (double mean : DecadeMeans(fraction_items)) {
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-scale * mean);
    }
  }
  data.push_back(0.0);
  data.push_back(1.0);
  if (data.size() != 256) throw std::logic_error("dynamic quantization map must have 256 values");
  std::sort(data.begin(), data.end());
  return std::vector<float>(data.begin(), data.end());
}

QuantizationMap::QuantizationMap(bool is_signed, const torch::Device& device) {
  std::vector<float> values = DynamicMapValues(is_signed);
  std::vector<float> midpoints(values.size() - 1);
  for (size_t i = 0; i + 1 < values.size(); ++i) midpoints[i] = (values[i] + values[i + 1]) / 2.0f;
  values_ = torch::tensor(values, torch::kFloat).to(device);
  midpoints_ = torch::tensor(midpoints, torch::kFloat).to(device);
}

void QuantizeBlockwise(const torch::Tensor& values, const QuantizationMap& map,
                       const torch::Tensor& codes, const torch::Tensor& absmax) {
  std::vector<torch::Tensor> value_rows = BlockRows(values);
  std::vector<torch::Tensor> code_rows = BlockRows(codes);
  int64_t block = 0;
  for (size_t r = 0; r < value_rows.size(); ++r) {
    const torch::Tensor& rows = value_rows[r];
    torch::Tensor row_absmax = rows.abs().amax(/*dim=*/1);
    absmax.narrow(0, block, rows.size(0)).copy_(row_absmax);
    block += rows.size(0);
    // An all-zero block encodes to the code of 0 with any scale; 1 avoids 0/0.
    torch::Tensor scale = row_absmax.masked_fill(row_absmax == 0, 1.0f).unsqueeze(1);
    // Nearest map value: the number of midpoints below the normalized value.
    torch::Tensor nearest = torch::searchsorted(map.midpoints(), rows / scale, /*out_int32=*/true);
    code_rows[r].copy_(nearest);
  }
}

torch::Tensor DequantizeBlockwise(const torch::Tensor& codes, const torch::Tensor& absmax,
                                  const QuantizationMap& map) {
  torch::Tensor out = map.values().index_select(0, codes.to(torch::kInt));
  int64_t block = 0;
  for (torch::Tensor rows : BlockRows(out)) {
    rows.mul_(absmax.narrow(0, block, rows.size(0)).unsqueeze(1));
    block += rows.size(0);
  }
  return out;
}

}  // namespace vramlab::worker::optim_internal
