#include "server/config/gpu_discovery.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vramlab::server {

absl::StatusOr<std::vector<Slot>> ParseNvidiaSmi(const std::string& output) {
  std::vector<Slot> slots;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    Slot slot;
    int64_t mib = 0;
    if (fields.size() != 4 ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[0]), &slot.index) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[3]), &mib)) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected nvidia-smi line: ", line));
    }
    slot.uuid = std::string(absl::StripAsciiWhitespace(fields[1]));
    slot.name = std::string(absl::StripAsciiWhitespace(fields[2]));
    slot.total_memory_bytes = mib * 1024 * 1024;
    slot.cuda_visible_devices = absl::StrCat(slot.index);
    slots.push_back(slot);
  }
  if (slots.empty()) return absl::NotFoundError("nvidia-smi lists no GPU");
  return slots;
}

absl::StatusOr<std::vector<Slot>> DiscoverGpus() {
  FILE* pipe = popen(
      "nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits "
      "2>/dev/null",
      "r");
  if (pipe == nullptr) return absl::UnavailableError("cannot run nvidia-smi");
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  int status = pclose(pipe);
  if (status != 0) {
    return absl::UnavailableError(
        "nvidia-smi failed: is the NVIDIA driver installed? "
        "(use --device cpu on a machine without a GPU)");
  }
  return ParseNvidiaSmi(output);
}

absl::StatusOr<std::vector<Slot>> SelectGpus(const std::vector<Slot>& gpus,
                                             const std::string& gpus_flag) {
  if (gpus_flag.empty()) return gpus;
  std::vector<Slot> selected;
  for (absl::string_view item : absl::StrSplit(gpus_flag, ',', absl::SkipWhitespace())) {
    int index = -1;
    if (!absl::SimpleAtoi(item, &index)) {
      return absl::InvalidArgumentError(absl::StrCat("--gpus: not a GPU index: ", item));
    }
    bool found = false;
    for (const Slot& gpu : gpus) {
      if (gpu.index == index) {
        for (const Slot& already : selected) {
          if (already.index == index) {
            return absl::InvalidArgumentError(absl::StrCat("--gpus: GPU ", index, " twice"));
          }
        }
        selected.push_back(gpu);
        found = true;
      }
    }
    if (!found) return absl::InvalidArgumentError(absl::StrCat("--gpus: no GPU ", index));
  }
  return selected;
}

int64_t HostMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? int64_t{pages} * page_size : 0;
}

std::vector<Slot> CpuSlots(int count) {
  // Each slot is an equal share of the host's RAM: the experiments that run at once fit together.
  int64_t share = count > 0 ? HostMemoryBytes() / count : 0;
  std::vector<Slot> slots;
  for (int i = 0; i < count; ++i) slots.push_back({i, "cpu", share, ""});
  return slots;
}

}  // namespace vramlab::server
