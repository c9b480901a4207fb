#include "server/estimate/qlora_load_allocations.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "common/spec/adapter_sizes.h"
#include "common/spec/model_family.h"
#include "server/estimate/adapter_model.h"
#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server::estimate {
namespace {

using spec_rules::CeilDiv;

constexpr int64_t kFp32 = 4;
constexpr int64_t kInt32 = 4;
// QuantizeNf4's slice: bounds its fp32 and int32 temporaries to 32 MiB each (nf4.cc).
constexpr int64_t kBlocksPerSlice = int64_t{1} << 17;
// absmax.mean() on the device: its result. A reduction over many blocks also makes a staging
// buffer and a semaphore of at most 1 KiB together, whose sizes depend on the device (520 and 4 B
// for a 7B MLP weight on an H100, none for its k and v projections:
// docs/results/h100-2026-12-07-traces/qloranative.trace): small-pool blocks, left out.
constexpr int64_t kMeanResultBytes = 4;

class QloraLoad {
 public:
  QloraLoad(const RunSettings& run, AllocationLog* log) : run_(run), log_(log) {}

  void Plan() {
    // Nf4Tables: the codebook pairs [256, 2] in the compute dtype, then the absmax map's 256
    // values and 255 midpoints in fp32; they live as long as the model.
    A(256 * 2 * run_.dtype_bytes), A(256 * kFp32), A(255 * kFp32);
    std::array<ProjectionFeatures, kNumProjections> features;
    for (int p = 0; p < kNumProjections; ++p) {
      features[p] = FeaturesOf(run_, static_cast<AdapterProjection>(p));
    }
    for (int64_t layer = 0; layer < run_.model.num_layers; ++layer) {
      for (const ProjectionFeatures& f : features) {
        if (f.wrapped) Quantize(f.in * f.out);
      }
    }
    MoveParameters(features);
  }

 private:
  int64_t A(int64_t bytes) { return log_->A(AllocatedBytes(run_.device, bytes)); }
  void F(int64_t id) { log_->F(id); }

  // QuantizeNf4 of a weight of `n` elements: what stays (the codes, the absmax codes and scales)
  // and its temporaries, in the order nf4.cc makes and frees them.
  void Quantize(int64_t n) {
    const int64_t blocks = CeilDiv(n, spec_rules::kNf4BlockSize);
    A(spec_rules::Nf4CodeBytes(n));            // q.codes, kept
    const int64_t absmax = A(blocks * kFp32);  // the block absmax, fp32
    const int64_t codebook = A(16 * kFp32);
    const int64_t pair_sum = A(15 * kFp32), midpoints = A(15 * kFp32);
    F(pair_sum);
    for (int64_t first = 0; first < blocks; first += kBlocksPerSlice) {
      const int64_t count = std::min(kBlocksPerSlice, blocks - first);
      const int64_t padded = count * spec_rules::kNf4BlockSize;
      const int64_t begin = first * spec_rules::kNf4BlockSize;
      const int64_t elements = std::min(n, begin + padded) - begin;
      int64_t values = A(elements * kFp32);  // the slice moved over, in fp32
      if (elements < padded) {
        const int64_t pad = A(padded * kFp32);
        F(values);
        values = pad;
      }
      const int64_t abs = A(padded * kFp32);
      const int64_t block_absmax = A(count * kFp32);
      F(abs);
      // where(block_absmax > 0, block_absmax, ones_like(block_absmax)), then the division.
      const int64_t ones = A(count * kFp32), positive = A(count), divisor = A(count * kFp32);
      const int64_t normalized = A(padded * kFp32);
      F(divisor), F(positive), F(ones);
      const int64_t index = A(padded * kInt32);  // bucketize, int32
      // The pairs packed: index[:, 0] * 16, plus index[:, 1], as uint8.
      const int64_t high = A(padded / 2 * kInt32), sum = A(padded / 2 * kInt32);
      const int64_t packed = A(padded / 2);
      F(sum), F(high);
      F(packed), F(index), F(normalized), F(block_absmax), F(values);
    }
    F(A(kMeanResultBytes));
    // Double quantisation: the absmax codes and scales (kept), then QuantizeBlockwise over
    // absmax less its mean, a group of whole 256-blocks rows and a last partial row.
    A(blocks);
    A(CeilDiv(blocks, spec_rules::kNf4AbsmaxBlockSize) * kFp32);
    const int64_t centred = A(blocks * kFp32);
    const int64_t full = blocks / spec_rules::kNf4AbsmaxBlockSize * spec_rules::kNf4AbsmaxBlockSize;
    if (full > 0) QuantizeRows(full, full / spec_rules::kNf4AbsmaxBlockSize);
    if (blocks > full) QuantizeRows(blocks - full, 1);
    F(centred);
    F(midpoints), F(codebook), F(absmax);
  }

  // One group of QuantizeBlockwise's rows: `elements` values in `rows` rows.
  void QuantizeRows(int64_t elements, int64_t rows) {
    const int64_t abs = A(elements * kFp32), row_absmax = A(rows * kFp32);
    F(abs);
    const int64_t zero = A(rows), scale = A(rows * kFp32);  // masked_fill(row_absmax == 0, 1)
    F(zero);
    const int64_t divided = A(elements * kFp32), nearest = A(elements * kInt32);
    F(divided);
    F(nearest), F(scale), F(row_absmax);
  }

  // Every parameter left on the host, in named_parameters() order (ParameterTensorElements): the
  // embedding, each layer's tensors (a quantised weight is empty; a wrapped projection's A and B
  // in the adapters' dtype follow its last tensor), the final norm and an untied lm_head.
  void MoveParameters(const std::array<ProjectionFeatures, kNumProjections>& features) {
    const int64_t e = run_.dtype_bytes;
    const std::vector<int64_t> layer_moves = LayerMoves(features);
    const std::vector<int64_t> tensors = ParameterTensorElements(run_.model);
    const size_t layers_begin = LayerTensorBegin(run_.model, 0);
    const size_t layers_end = LayerTensorBegin(run_.model, run_.model.num_layers);
    for (size_t t = 0; t < layers_begin; ++t) A(tensors[t] * e);
    for (int64_t l = 0; l < run_.model.num_layers; ++l) {
      for (int64_t bytes : layer_moves) A(bytes);
    }
    for (size_t t = layers_end; t < tensors.size(); ++t) A(tensors[t] * e);
  }

  // One decoder layer's moves, in bytes, the same for every layer.
  std::vector<int64_t> LayerMoves(
      const std::array<ProjectionFeatures, kNumProjections>& features) const {
    const std::vector<spec_rules::ParameterTensorInfo> layer =
        spec_rules::DecoderLayerTensors(run_.model.Decoder());
    const int64_t e = run_.dtype_bytes, ab = run_.adapter.dtype_bytes, rank = run_.adapter.rank;
    std::vector<int64_t> moves;
    for (size_t t = 0; t < layer.size(); ++t) {
      const int p = ProjectionOf(layer[t].name);
      const bool quantised = p >= 0 && features[p].wrapped &&
                             layer[t].name == std::string(kProjectionPaths[p]) + ".weight";
      if (!quantised) moves.push_back(layer[t].elements() * e);
      const bool last_of_projection =
          p >= 0 && (t + 1 == layer.size() || ProjectionOf(layer[t + 1].name) != p);
      if (last_of_projection && features[p].wrapped) {
        moves.push_back(rank * features[p].in * ab);
        moves.push_back(features[p].out * rank * ab);
      }
    }
    return moves;
  }

  // The projection a layer tensor belongs to, -1 for none.
  static int ProjectionOf(const std::string& name) {
    for (int p = 0; p < kNumProjections; ++p) {
      const std::string path = kProjectionPaths[p];
      if (name.compare(0, path.size() + 1, path + ".") == 0) return p;
    }
    return -1;
  }

  const RunSettings& run_;
  AllocationLog* const log_;
};

}  // namespace

void PlanQloraLoad(const RunSettings& run, AllocationLog* log) { QloraLoad(run, log).Plan(); }

}  // namespace vramlab::server::estimate
