// Writes tensors in the safetensors format (the inverse of SafetensorsFile).
#ifndef VRAMLAB_WORKER_SAFETENSORS_SAFETENSORS_WRITER_H_
#define VRAMLAB_WORKER_SAFETENSORS_SAFETENSORS_WRITER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace vramlab::worker {

// Writes `tensors` (any device; copied to the CPU one at a time) in the given order, data packed
// without gaps and the header padded to a multiple of 8 bytes as the reference writer does.
// Throws LoadError (naming the file) when the file cannot be written or a dtype has no
// safetensors name.
void WriteSafetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The safetensors name of a torch dtype ("F32", "BF16", ...); empty when there is none.
std::string SafetensorsDtypeName(torch::Dtype dtype);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SAFETENSORS_SAFETENSORS_WRITER_H_
