#include "worker/safetensors/safetensors_writer.h"

#include <cstdint>
#include <fstream>

#include <nlohmann/json.hpp>

#include "worker/safetensors/load_error.h"
#include "worker/safetensors/safetensors_file.h"

namespace vramlab::worker {

std::string SafetensorsDtypeName(torch::Dtype dtype) {
  for (const char* name : {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"}) {
    torch::Dtype candidate;
    if (SafetensorsDtype(name, &candidate) && candidate == dtype) return name;
  }
  return "";
}

void WriteSafetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string dtype = SafetensorsDtypeName(tensor.scalar_type());
    if (dtype.empty()) {
      throw LoadError(path + ": tensor \"" + name + "\": dtype has no safetensors name");
    }
    const uint64_t bytes = tensor.numel() * tensor.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& item : tensors) {
    const torch::Tensor cpu = item.second.to(torch::kCPU).contiguous();
    out.write(static_cast<const char*>(cpu.data_ptr()),
              static_cast<std::streamsize>(cpu.numel() * cpu.element_size()));
  }
  out.close();
  if (!out) throw LoadError(path + ": cannot write");
}

}  // namespace vramlab::worker
