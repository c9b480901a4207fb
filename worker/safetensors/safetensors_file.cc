#include "worker/safetensors/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/hf/json_value_text.h"
#include "worker/util/host_files.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; tensors are viewed in place");

namespace vramlab::worker {
namespace {

using hf::DescribeJsonValue;

constexpr size_t kLengthPrefix = 8;

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw LoadError(path + ": " + what);
}

[[noreturn]] void FailTensor(const std::string& path, const std::string& tensor,
                             const std::string& what) {
  throw LoadError(path + ": tensor \"" + tensor + "\": " + what);
}

// Closes the descriptor on every path out of Open().
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

uint64_t NonNegativeInteger(const std::string& path, const std::string& tensor,
                            const nlohmann::json& value, const char* field) {
  const bool ok =
      value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
  if (!ok) {
    FailTensor(
        path, tensor,
        std::string(field) + " must hold non-negative integers, got " + DescribeJsonValue(value));
  }
  return value.get<uint64_t>();
}

SafetensorsEntry ParseEntry(const std::string& path, const std::string& name,
                            const nlohmann::json& json, uint64_t data_size) {
  if (!json.is_object()) FailTensor(path, name, "header entry is not an object");
  SafetensorsEntry entry;
  auto dtype = json.find("dtype");
  if (dtype == json.end() || !dtype->is_string()) FailTensor(path, name, "missing dtype");
  entry.dtype = dtype->get<std::string>();
  if (!SafetensorsDtype(entry.dtype, &entry.scalar_type)) {
    FailTensor(path, name, "unknown or unsupported dtype \"" + entry.dtype + "\"");
  }
  auto shape = json.find("shape");
  if (shape == json.end() || !shape->is_array()) FailTensor(path, name, "missing shape");
  // numel in unsigned 128-bit arithmetic: a hostile shape must not overflow into a small size.
  unsigned __int128 bytes = torch::elementSize(entry.scalar_type);
  for (const auto& dim : *shape) {
    const uint64_t d = NonNegativeInteger(path, name, dim, "shape");
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      FailTensor(path, name, "shape dimension too large");
    }
    entry.shape.push_back(static_cast<int64_t>(d));
    bytes *= d;  // clamped below so the product stays far from overflow
    if (bytes > data_size) bytes = static_cast<unsigned __int128>(data_size) + 1;
  }
  auto offsets = json.find("data_offsets");
  if (offsets == json.end() || !offsets->is_array() || offsets->size() != 2) {
    FailTensor(path, name, "data_offsets must be [begin, end]");
  }
  entry.begin = NonNegativeInteger(path, name, (*offsets)[0], "data_offsets");
  entry.end = NonNegativeInteger(path, name, (*offsets)[1], "data_offsets");
  const std::string range =
      "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
  if (entry.begin > entry.end) FailTensor(path, name, range + " are reversed");
  if (entry.end > data_size) {
    FailTensor(path, name,
               range + " reach past the end of the data buffer (" + std::to_string(data_size) +
                   " bytes; file truncated?)");
  }
  if (bytes != entry.end - entry.begin) {
    FailTensor(path, name,
               range + " hold " + std::to_string(entry.end - entry.begin) + " bytes but dtype " +
                   entry.dtype + " and shape " + DescribeJsonValue(*shape) + " need " +
                   std::to_string(static_cast<uint64_t>(bytes)));
  }
  return entry;
}

}  // namespace

bool SafetensorsDtype(const std::string& name, torch::Dtype* dtype) {
  static const std::map<std::string, torch::Dtype> kDtypes = {
      {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
      {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
      {"BOOL", torch::kBool},
  };
  auto it = kDtypes.find(name);
  if (it == kDtypes.end()) return false;
  *dtype = it->second;
  return true;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  FileDescriptor file{-1};
  try {
    file.fd = OpenHostFile(path);
  } catch (const HostFileError& e) {
    throw LoadError(e.what());
  }
  struct stat st;
  if (::fstat(file.fd, &st) != 0) Fail(path, std::string("cannot stat: ") + std::strerror(errno));
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kLengthPrefix) {
    Fail(path,
         "truncated: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapping == MAP_FAILED) Fail(path, std::string("cannot mmap: ") + std::strerror(errno));
  ::madvise(mapping, size, MADV_SEQUENTIAL);
  // Owned from here on: the destructor unmaps even if the header is rejected.
  std::unique_ptr<SafetensorsFile> result(
      new SafetensorsFile(path, static_cast<const uint8_t*>(mapping), size));
  result->ParseHeader();
  return result;
}

SafetensorsFile::SafetensorsFile(std::string path, const uint8_t* data, size_t size)
    : path_(std::move(path)), mapping_(data), size_(size) {}

SafetensorsFile::~SafetensorsFile() { ::munmap(const_cast<uint8_t*>(mapping_), size_); }

void SafetensorsFile::ParseHeader() {
  uint64_t header_length = 0;
  std::memcpy(&header_length, mapping_, kLengthPrefix);
  if (header_length > size_ - kLengthPrefix) {
    Fail(path_, "header length " + std::to_string(header_length) + " reaches past the end of the " +
                    std::to_string(size_) + "-byte file");
  }
  data_start_ = kLengthPrefix + header_length;
  const uint64_t data_size = size_ - data_start_;
  const char* text = reinterpret_cast<const char*>(mapping_ + kLengthPrefix);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + header_length);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() quotes the bytes it stopped at: only the position is reported.
    Fail(path_, "header is not valid JSON (at byte " + std::to_string(e.byte) + " of the header)");
  }
  if (!header.is_object()) Fail(path_, "header is not a JSON object");
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) Fail(path_, "__metadata__ is not an object");
      for (const auto& [key, text_value] : value.items()) {
        if (!text_value.is_string()) Fail(path_, "__metadata__." + key + " is not a string");
        metadata_[key] = text_value.get<std::string>();
      }
      continue;
    }
    entries_[name] = ParseEntry(path_, name, value, data_size);
  }
  // The format forbids overlaps and holes: sorted by offset, each tensor starts where the previous
  // one ends and the last one ends at the end of the file.
  std::vector<const std::pair<const std::string, SafetensorsEntry>*> order;
  for (const auto& item : entries_) order.push_back(&item);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return std::make_pair(a->second.begin, a->second.end) <
           std::make_pair(b->second.begin, b->second.end);
  });
  uint64_t expected_begin = 0;
  const std::string* previous = nullptr;
  for (const auto* item : order) {
    const SafetensorsEntry& entry = item->second;
    if (entry.begin < expected_begin) {
      FailTensor(path_, item->first, "data_offsets overlap those of \"" + *previous + "\"");
    }
    if (entry.begin > expected_begin) {
      FailTensor(path_, item->first,
                 "data_offsets leave a hole of " + std::to_string(entry.begin - expected_begin) +
                     " bytes before it");
    }
    expected_begin = entry.end;
    previous = &item->first;
  }
  if (expected_begin != data_size) {
    Fail(path_, "data buffer is " + std::to_string(data_size) + " bytes but its tensors cover " +
                    std::to_string(expected_begin));
  }
}

torch::Tensor SafetensorsFile::View(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) FailTensor(path_, name, "no such tensor");
  const SafetensorsEntry& entry = it->second;
  const uint8_t* bytes = mapping_ + data_start_ + entry.begin;
  const auto options = torch::TensorOptions().dtype(entry.scalar_type);
  if (reinterpret_cast<uintptr_t>(bytes) % torch::elementSize(entry.scalar_type) != 0) {
    torch::Tensor aligned = torch::empty(entry.shape, options);
    std::memcpy(aligned.data_ptr(), bytes, entry.end - entry.begin);
    return aligned;
  }
  // from_blob never writes; the mapping is PROT_READ, so a write would fault, not corrupt.
  return torch::from_blob(const_cast<uint8_t*>(bytes), entry.shape, options);
}

void SafetensorsFile::Release(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(mapping_);
  // Only whole pages inside this tensor's range: neighbours may still be needed.
  uintptr_t first = base + data_start_ + it->second.begin;
  uintptr_t last = base + data_start_ + it->second.end;
  first = (first + page - 1) / page * page;
  last = last / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

std::map<std::string, torch::Tensor> ReadAllTensors(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::Open(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : file->entries()) tensors[item.first] = file->View(item.first).clone();
  return tensors;
}

}  // namespace vramlab::worker
