// The status-propagation macros the daemon and the CLI use (Abseil 20220623 ships none).
#ifndef VRAMLAB_COMMON_STATUS_MACROS_H_
#define VRAMLAB_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define VRAMLAB_CONCAT_INNER_(a, b) a##b
#define VRAMLAB_CONCAT_(a, b) VRAMLAB_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status vramlab_status_ = (expr);           \
    if (!vramlab_status_.ok()) return vramlab_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, else moves the value
// into `lhs` (a declaration such as `auto x` or an existing variable).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(VRAMLAB_CONCAT_(vramlab_statusor_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return statusor.status();      \
  lhs = std::move(statusor).value()

#endif  // VRAMLAB_COMMON_STATUS_MACROS_H_
