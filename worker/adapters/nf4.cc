#include "worker/adapters/nf4.h"

#include <algorithm>

#include "common/spec/adapter_sizes.h"
#include "worker/optim/blockwise_quantizer.h"

namespace vramlab::worker {
namespace {

using spec_rules::kNf4BlockSize;
// Blocks quantised per slice: bounds the fp32 and int32 slice temporaries to 32 MiB each.
constexpr int64_t kBlocksPerSlice = int64_t{1} << 17;

torch::Tensor CodebookTensor(torch::Dtype dtype, const torch::Device& device) {
  const std::array<float, 16>& cb = Nf4Codebook();
  return torch::tensor(std::vector<float>(cb.begin(), cb.end()), torch::kFloat32).to(device, dtype);
}

// [256, 2]: the two codebook values byte b stands for (high nibble first).
torch::Tensor MakePairTable(torch::Dtype dtype, const torch::Device& device) {
  torch::Tensor bytes = torch::arange(256, torch::kInt64);
  torch::Tensor codebook = CodebookTensor(torch::kFloat32, torch::kCPU);
  torch::Tensor table = torch::stack({codebook.index_select(0, bytes.div(16, "floor")),
                                      codebook.index_select(0, bytes.remainder(16))},
                                     1);
  return table.to(device, dtype);
}

}  // namespace

Nf4Tables::Nf4Tables(torch::Dtype compute_dtype, const torch::Device& device)
    : pair_table_(MakePairTable(compute_dtype, device)), absmax_map_(/*is_signed=*/true, device) {}

const std::array<float, 16>& Nf4Codebook() {
  static const std::array<float, 16> codebook = {-1.0f,
                                                 -0.6961928009986877f,
                                                 -0.5250730514526367f,
                                                 -0.39491748809814453f,
                                                 -0.28444138169288635f,
                                                 -0.18477343022823334f,
                                                 -0.09105003625154495f,
                                                 0.0f,
                                                 0.07958029955625534f,
                                                 0.16093020141124725f,
                                                 0.24611230194568634f,
                                                 0.33791524171829224f,
                                                 0.44070982933044434f,
                                                 0.5626170039176941f,
                                                 0.7229568362236023f,
                                                 1.0f};
  return codebook;
}

Nf4Tensor QuantizeNf4(const torch::Tensor& weight, std::shared_ptr<const Nf4Tables> tables) {
  torch::NoGradGuard no_grad;
  Nf4Tensor q;
  q.shape = weight.sizes().vec();
  q.numel = weight.numel();
  q.tables = std::move(tables);
  const torch::Device device = q.tables->pair_table().device();
  const auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(device);
  const int64_t blocks = spec_rules::CeilDiv(q.numel, kNf4BlockSize);
  // Two codes per byte; an odd element count leaves the last low nibble 0.
  q.codes = torch::empty({spec_rules::Nf4CodeBytes(q.numel)}, u8);
  torch::Tensor absmax = torch::empty({blocks}, u8.dtype(torch::kFloat32));
  const torch::Tensor codebook = CodebookTensor(torch::kFloat32, device);
  const torch::Tensor midpoints = (codebook.slice(0, 1) + codebook.slice(0, 0, 15)) / 2;
  const torch::Tensor flat = weight.reshape({-1});  // on its own device; slices move over
  for (int64_t first = 0; first < blocks; first += kBlocksPerSlice) {
    const int64_t count = std::min(kBlocksPerSlice, blocks - first);
    const int64_t begin = first * kNf4BlockSize;
    const int64_t end = std::min(q.numel, (first + count) * kNf4BlockSize);
    torch::Tensor values = flat.slice(0, begin, end).to(device, torch::kFloat32);
    if (values.numel() < count * kNf4BlockSize) {
      values = torch::nn::functional::pad(values, torch::nn::functional::PadFuncOptions(
                                                      {0, count * kNf4BlockSize - values.numel()}));
    }
    values = values.view({count, kNf4BlockSize});
    torch::Tensor block_absmax = values.abs().amax(1);
    absmax.slice(0, first, first + count).copy_(block_absmax);
    torch::Tensor normalized =
        values /
        torch::where(block_absmax > 0, block_absmax, torch::ones_like(block_absmax)).unsqueeze(1);
    // Nearest value; a tie (exactly a midpoint) goes to the lower index (right=false).
    torch::Tensor index =
        torch::bucketize(normalized, midpoints, /*out_int32=*/true, /*right=*/false).view({-1});
    if (index.numel() % 2 != 0) index = torch::cat({index, index.new_zeros({1})});
    index = index.view({-1, 2});
    torch::Tensor packed = (index.select(1, 0) * 16 + index.select(1, 1)).to(torch::kUInt8);
    const int64_t byte_begin = begin / 2;
    const int64_t byte_count = std::min<int64_t>(packed.numel(), q.codes.numel() - byte_begin);
    q.codes.slice(0, byte_begin, byte_begin + byte_count).copy_(packed.slice(0, 0, byte_count));
  }
  // Double quantisation of the absmax values (bitsandbytes: offset = mean, blocks of 256).
  q.absmax_offset = absmax.mean().item<double>();
  q.absmax_codes = torch::empty({blocks}, u8);
  q.absmax_scales =
      torch::empty({optim_internal::NumQuantBlocks(blocks)}, u8.dtype(torch::kFloat32));
  optim_internal::QuantizeBlockwise(absmax - q.absmax_offset, q.tables->absmax_map(),
                                    q.absmax_codes, q.absmax_scales);
  return q;
}

torch::Tensor Nf4Absmax(const Nf4Tensor& q) {
  torch::NoGradGuard no_grad;
  return optim_internal::DequantizeBlockwise(q.absmax_codes, q.absmax_scales,
                                             q.tables->absmax_map()) +
         q.absmax_offset;
}

torch::Tensor DequantizeNf4(const Nf4Tensor& q) {
  torch::NoGradGuard no_grad;
  const torch::Tensor& table = q.tables->pair_table();
  const torch::Dtype dtype = table.scalar_type();
  const int64_t blocks = q.absmax_codes.numel();
  // [bytes, 2] -> [blocks * 64] (a padded tail past numel is dropped below).
  torch::Tensor values = table.index_select(0, q.codes.to(torch::kInt32)).view({-1});
  const int64_t padded = blocks * kNf4BlockSize;
  if (values.numel() < padded)
    values = torch::cat({values, values.new_zeros({padded - values.numel()})});
  values = values.slice(0, 0, padded).view({blocks, kNf4BlockSize});
  values.mul_(Nf4Absmax(q).to(dtype).unsqueeze(1));
  return values.view({-1}).slice(0, 0, q.numel).view(q.shape);
}

}  // namespace vramlab::worker
