// Wire enums (normd.v1) -> kernel and scheduling enums. *_UNSPECIFIED reads as the
// documented default; a number the server does not know is INVALID_ARGUMENT naming the
// field (never a silent default: proto3 keeps unknown numbers in open enums).
//
// Stateless; safe from any thread.
#ifndef NORMD_SERVER_WIRE_ENUMS_H_
#define NORMD_SERVER_WIRE_ENUMS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "normd/kernels/dtype.h"
#include "normd/kernels/ops.h"
#include "normd/scheduling/job.h"
#include "normd/v1/normd.pb.h"

namespace normd::server {

// A tensor's dtype: DATA_TYPE_UNSPECIFIED is INVALID_ARGUMENT too.
absl::StatusOr<kernels::DType> KernelDType(v1::DataType dtype, absl::string_view field);
v1::DataType WireDType(kernels::DType dtype);

absl::StatusOr<BackendPreference> ToBackendPreference(v1::Backend backend, absl::string_view field);
absl::StatusOr<kernels::EpsPlacement> KernelEpsPlacement(v1::EpsPlacement placement,
                                                         absl::string_view field);
absl::StatusOr<kernels::Layout> KernelLayout(v1::Layout layout, absl::string_view field);
absl::StatusOr<kernels::ResidualPlacement> KernelResidualPlacement(v1::ResidualPlacement placement,
                                                                   absl::string_view field);
absl::StatusOr<kernels::RowNormKind> KernelQkKind(v1::QkNormKind kind, absl::string_view field);

}  // namespace normd::server

#endif  // NORMD_SERVER_WIRE_ENUMS_H_
