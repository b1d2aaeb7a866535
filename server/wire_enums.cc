#include "server/wire_enums.h"

#include "server/field_error.h"

namespace normd::server {
namespace {

// "expected A, B or C, got NAME (N)" for a value outside the accepted ones.
template <class Enum>
absl::Status Unexpected(absl::string_view field, absl::string_view expected, Enum value,
                        bool (*is_valid)(int), const std::string& (*name)(Enum)) {
  const int n = static_cast<int>(value);
  return InvalidField(field, "expected ", expected, ", got ",
                      is_valid(n) ? name(value) : std::string("an unknown value"), " (", n, ")");
}

}  // namespace

absl::StatusOr<kernels::DType> KernelDType(v1::DataType dtype, absl::string_view field) {
  switch (dtype) {
    case v1::DATA_TYPE_F32:
      return kernels::DType::kF32;
    case v1::DATA_TYPE_F16:
      return kernels::DType::kF16;
    case v1::DATA_TYPE_BF16:
      return kernels::DType::kBF16;
    default:
      return Unexpected(field, "DATA_TYPE_F32, DATA_TYPE_F16 or DATA_TYPE_BF16", dtype,
                        v1::DataType_IsValid, v1::DataType_Name<v1::DataType>);
  }
}

v1::DataType WireDType(kernels::DType dtype) {
  switch (dtype) {
    case kernels::DType::kF32:
      return v1::DATA_TYPE_F32;
    case kernels::DType::kF16:
      return v1::DATA_TYPE_F16;
    case kernels::DType::kBF16:
      return v1::DATA_TYPE_BF16;
  }
  return v1::DATA_TYPE_UNSPECIFIED;
}

absl::StatusOr<BackendPreference> ToBackendPreference(v1::Backend backend,
                                                      absl::string_view field) {
  switch (backend) {
    case v1::BACKEND_UNSPECIFIED:
      return BackendPreference::kAuto;
    case v1::BACKEND_CPU:
      return BackendPreference::kCpu;
    case v1::BACKEND_CUDA:
      return BackendPreference::kCuda;
    default:
      return Unexpected(field, "BACKEND_UNSPECIFIED, BACKEND_CPU or BACKEND_CUDA", backend,
                        v1::Backend_IsValid, v1::Backend_Name<v1::Backend>);
  }
}

absl::StatusOr<kernels::EpsPlacement> KernelEpsPlacement(v1::EpsPlacement placement,
                                                         absl::string_view field) {
  switch (placement) {
    case v1::EPS_PLACEMENT_UNSPECIFIED:
    case v1::EPS_PLACEMENT_INSIDE_SQRT:
      return kernels::EpsPlacement::kInsideSqrt;
    case v1::EPS_PLACEMENT_OUTSIDE_SQRT:
      return kernels::EpsPlacement::kOutsideSqrt;
    default:
      return Unexpected(field, "EPS_PLACEMENT_INSIDE_SQRT or EPS_PLACEMENT_OUTSIDE_SQRT", placement,
                        v1::EpsPlacement_IsValid, v1::EpsPlacement_Name<v1::EpsPlacement>);
  }
}

absl::StatusOr<kernels::Layout> KernelLayout(v1::Layout layout, absl::string_view field) {
  switch (layout) {
    case v1::LAYOUT_UNSPECIFIED:
    case v1::LAYOUT_CHANNELS_FIRST:
      return kernels::Layout::kChannelsFirst;
    case v1::LAYOUT_CHANNELS_LAST:
      return kernels::Layout::kChannelsLast;
    default:
      return Unexpected(field, "LAYOUT_CHANNELS_FIRST or LAYOUT_CHANNELS_LAST", layout,
                        v1::Layout_IsValid, v1::Layout_Name<v1::Layout>);
  }
}

absl::StatusOr<kernels::ResidualPlacement> KernelResidualPlacement(v1::ResidualPlacement placement,
                                                                   absl::string_view field) {
  switch (placement) {
    case v1::RESIDUAL_PLACEMENT_UNSPECIFIED:
    case v1::RESIDUAL_PLACEMENT_ADD_THEN_NORM:
      return kernels::ResidualPlacement::kAddThenNorm;
    case v1::RESIDUAL_PLACEMENT_NORM_THEN_ADD:
      return kernels::ResidualPlacement::kNormThenAdd;
    default:
      return Unexpected(
          field, "RESIDUAL_PLACEMENT_ADD_THEN_NORM or RESIDUAL_PLACEMENT_NORM_THEN_ADD", placement,
          v1::ResidualPlacement_IsValid, v1::ResidualPlacement_Name<v1::ResidualPlacement>);
  }
}

absl::StatusOr<kernels::RowNormKind> KernelQkKind(v1::QkNormKind kind, absl::string_view field) {
  switch (kind) {
    case v1::QK_NORM_KIND_UNSPECIFIED:
    case v1::QK_NORM_KIND_RMS:
      return kernels::RowNormKind::kRms;
    case v1::QK_NORM_KIND_LAYER:
      return kernels::RowNormKind::kLayer;
    case v1::QK_NORM_KIND_L2:
      return kernels::RowNormKind::kL2;
    default:
      return Unexpected(field, "QK_NORM_KIND_RMS, QK_NORM_KIND_LAYER or QK_NORM_KIND_L2", kind,
                        v1::QkNormKind_IsValid, v1::QkNormKind_Name<v1::QkNormKind>);
  }
}

}  // namespace normd::server
