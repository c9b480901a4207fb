// A read-only, memory-mapped safetensors file
// (https://huggingface.co/docs/safetensors: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// data buffer that the offsets index).
//
// Open() validates the whole header before any tensor is read: a file shorter than 8 bytes, a
// header length past the end, JSON that is not an object of entries, an unknown dtype, a shape with
// negative dims, offsets that are reversed, out of range, overlapping, leave holes or disagree with
// dtype x shape. Every failure is a LoadError naming the file (and the tensor).
#ifndef VRAMLAB_WORKER_SAFETENSORS_SAFETENSORS_FILE_H_
#define VRAMLAB_WORKER_SAFETENSORS_SAFETENSORS_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/safetensors/load_error.h"

namespace vramlab::worker {

struct SafetensorsEntry {
  std::string dtype;         // as written: "F32", "BF16", ...
  torch::Dtype scalar_type;  // its torch equivalent
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range inside the data buffer
};

class SafetensorsFile {
 public:
  // Maps `path` and validates its header. Throws LoadError.
  static std::unique_ptr<SafetensorsFile> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A CPU tensor viewing the mapped bytes of `name`: valid only while this file lives, and never
  // to be written. Copied first only when the bytes are misaligned for the element type. Throws
  // LoadError for an unknown name.
  torch::Tensor View(const std::string& name) const;
  // Tells the kernel that the pages of `name` are no longer needed (keeps the resident set at
  // about one tensor while a model streams through).
  void Release(const std::string& name) const;

 private:
  SafetensorsFile(std::string path, const uint8_t* data, size_t size);
  void ParseHeader();

  std::string path_;
  const uint8_t* mapping_;  // the whole file, PROT_READ
  size_t size_;
  size_t data_start_ = 0;  // 8 + header length
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Reads every tensor of a file into owned CPU tensors (for tests and small reference files).
std::map<std::string, torch::Tensor> ReadAllTensors(const std::string& path);

// "F32" -> kFloat32 etc. Returns false for a dtype torch cannot hold.
bool SafetensorsDtype(const std::string& name, torch::Dtype* dtype);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SAFETENSORS_SAFETENSORS_FILE_H_
