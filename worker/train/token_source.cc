#include "worker/train/token_source.h"

#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

#include "worker/spec/experiment_spec.h"
#include "worker/util/host_files.h"

namespace vramlab::worker {

TokenSource TokenSource::Synthetic(uint64_t seed, int64_t bound) {
  TokenSource source;
  source.bound_ = bound;
  source.generator_ = at::detail::createCPUGenerator(seed);
  return source;
}

TokenSource TokenSource::FromFile(const std::string& path, int64_t vocab_size) {
  const std::string field = "training.data.token_ids_file";
  // 1 GiB of text is some 10^8 ids, far more than any run consumes (the file is cycled).
  constexpr size_t kMaxBytes = size_t{1} << 30;
  std::string text;
  try {
    text = ReadHostFile(path, kMaxBytes);
  } catch (const HostFileError& e) {
    throw SpecError(field, e.what());
  }
  std::istringstream in(text);
  TokenSource source;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0 || id >= vocab_size) {
      // The word itself is not quoted: an error must never carry a file's content.
      throw SpecError(field, path + ": word " + std::to_string(source.file_ids_.size() + 1) +
                                 " is not a token id in [0, " + std::to_string(vocab_size) + ")");
    }
    source.file_ids_.push_back(id);
  }
  if (source.file_ids_.empty()) throw SpecError(field, path + " holds no token ids");
  return source;
}

torch::Tensor TokenSource::Next(int64_t batch, int64_t seq_len) {
  if (!file_ids_.empty()) {
    torch::Tensor ids = torch::empty({batch, seq_len}, torch::kInt64);
    int64_t* out = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < batch * seq_len; ++i) {
      out[i] = file_ids_[cursor_];
      cursor_ = (cursor_ + 1) % file_ids_.size();
    }
    return ids;
  }
  std::vector<torch::Tensor> rows;
  rows.reserve(static_cast<size_t>(batch));
  for (int64_t row = 0; row < batch; ++row) {
    rows.push_back(at::randint(0, bound_, {1, seq_len}, generator_,
                               torch::TensorOptions().dtype(torch::kInt64)));
  }
  return torch::cat(rows, 0);
}

}  // namespace vramlab::worker
