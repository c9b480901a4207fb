// Checked output to stdout: std::cout writes through C stdio's stdout, as it does by default (the
// same buffering: by line on a terminal, by block otherwise), and the errno of the first write
// that fails is kept, so that output lost to a full disk or a closed pipe is reported with its
// reason when stdout is flushed.
#ifndef VRAMLAB_CLIENT_STDOUT_CHECK_H_
#define VRAMLAB_CLIENT_STDOUT_CHECK_H_

#include "absl/status/status.h"

namespace vramlab::client {

// Points std::cout at the checked buffer. Call once, before anything is written to std::cout.
void CheckStdoutWrites();

// Flushes std::cout and stdout. INVALID_ARGUMENT "cannot write to stdout: REASON" when any output
// since the start was lost (REASON from the first failed write when CheckStdoutWrites was called,
// else from the flush, else "write error").
absl::Status FlushStdout();

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_STDOUT_CHECK_H_
