#include "client/stdout_check.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>

#include "absl/strings/str_cat.h"

namespace vramlab::client {
namespace {

// Forwards to stdout without buffering of its own; stdio does the buffering.
class CheckedStdoutBuffer final : public std::streambuf {
 public:
  // 0 while no write has failed.
  int first_error() const { return first_error_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    if (std::fputc(traits_type::to_char_type(c), stdout) == EOF) return Failed();
    return c;
  }
  std::streamsize xsputn(const char* data, std::streamsize size) override {
    const size_t written = std::fwrite(data, 1, static_cast<size_t>(size), stdout);
    if (written < static_cast<size_t>(size)) Failed();
    return static_cast<std::streamsize>(written);
  }
  int sync() override { return std::fflush(stdout) == 0 ? 0 : (Failed(), -1); }

 private:
  int_type Failed() {
    if (first_error_ == 0) first_error_ = errno != 0 ? errno : EIO;
    return traits_type::eof();
  }

  int first_error_ = 0;
};

CheckedStdoutBuffer* checked_buffer = nullptr;

}  // namespace

void CheckStdoutWrites() {
  if (checked_buffer == nullptr) checked_buffer = new CheckedStdoutBuffer();
  std::cout.rdbuf(checked_buffer);
}

absl::Status FlushStdout() {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_error = errno;
  const int first_error = checked_buffer != nullptr ? checked_buffer->first_error() : 0;
  if (flushed && std::cout && !std::ferror(stdout) && first_error == 0) return absl::OkStatus();
  const int error = first_error != 0 ? first_error : flush_error;
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write to stdout: ", error != 0 ? std::strerror(error) : "write error"));
}

}  // namespace vramlab::client
