// Early-return helpers for absl::Status / absl::StatusOr, which Abseil 20220623 does not
// export. Header-only.
//
//   NORMD_RETURN_IF_ERROR(CheckEps(eps, "layer_norm.eps"));
//   NORMD_ASSIGN_OR_RETURN(TensorInfo x, CheckTensor(t, "input", limits));
#ifndef NORMD_COMMON_STATUS_MACROS_H_
#define NORMD_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define NORMD_RETURN_IF_ERROR(expr)                                        \
  do {                                                                     \
    if (::absl::Status _normd_s = (expr); !_normd_s.ok()) return _normd_s; \
  } while (0)

#define NORMD_STATUS_CONCAT_INNER(a, b) a##b
#define NORMD_STATUS_CONCAT(a, b) NORMD_STATUS_CONCAT_INNER(a, b)

#define NORMD_ASSIGN_OR_RETURN(lhs, expr) \
  NORMD_ASSIGN_OR_RETURN_IMPL(NORMD_STATUS_CONCAT(_normd_or_, __LINE__), lhs, expr)
#define NORMD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)

#endif  // NORMD_COMMON_STATUS_MACROS_H_
