// Byte sizes as people type them ("24GiB", "512M", "1.5 GiB", "4096") and as people read them
// ("23.50 GiB"). Binary units throughout: a GPU's "24 GB" is 24 GiB to the allocator.
#ifndef VRAMLAB_CLIENT_BYTE_SIZE_H_
#define VRAMLAB_CLIENT_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::client {

// Accepts a non-negative number (fraction allowed) followed by an optional unit: B, K/KB/KiB,
// M/MB/MiB, G/GB/GiB, T/TB/TiB (case-insensitive, all binary). INVALID_ARGUMENT otherwise, or
// when the result does not fit in int64.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// "512 B", "1.50 KiB", "12.00 MiB", "23.50 GiB": the largest unit that keeps the number >= 1,
// two decimals. Negative sizes keep their sign.
std::string FormatBytes(int64_t bytes);

// FormatBytes with an explicit sign ("+1.00 GiB", "-512 B", "0 B"): for differences.
std::string FormatBytesDelta(int64_t bytes);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_BYTE_SIZE_H_
