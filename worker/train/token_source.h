// Input ids of the training loop: seeded synthetic ids, uniform in [0, bound) like the lab
// report's torch.randint(0, 1000, ...), or ids read from a file and used in order, repeating.
//
// Rows are produced one at a time from one stream, so the same rows come out whatever the
// micro-batch size: micro-batch 4 x accumulation 1 and 1 x 4 train on identical data.
#ifndef VRAMLAB_WORKER_TRAIN_TOKEN_SOURCE_H_
#define VRAMLAB_WORKER_TRAIN_TOKEN_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/torch.h>

namespace vramlab::worker {

class TokenSource {
 public:
  // Synthetic ids from a generator seeded with `seed`.
  static TokenSource Synthetic(uint64_t seed, int64_t bound);
  // Whitespace-separated ids from `path`; each must be in [0, vocab_size). Throws SpecError
  // (field training.data.token_ids_file) if unreadable, empty or out of range.
  static TokenSource FromFile(const std::string& path, int64_t vocab_size);

  // [batch, seq_len] int64 on the CPU.
  torch::Tensor Next(int64_t batch, int64_t seq_len);

 private:
  TokenSource() = default;

  int64_t bound_ = 0;
  at::Generator generator_;
  std::vector<int64_t> file_ids_;  // empty for synthetic ids
  size_t cursor_ = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_TOKEN_SOURCE_H_
