// RMSNorm and L2Norm of narrow rows (narrow_rows-inl.h's NarrowRowsT, through
// PickNarrowRows<kT, kCast>), instantiated here for every SIMD target, apart from
// row_norm_simd.cc, so that a build compiles them side by side. Stateless; safe from any
// thread.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/narrow_rows.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/narrow_rows-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

template NarrowRowsFn PickNarrowRows<DType::kF32, false>(bool, bool);
template NarrowRowsFn PickNarrowRows<DType::kF16, false>(bool, bool);
template NarrowRowsFn PickNarrowRows<DType::kF16, true>(bool, bool);
template NarrowRowsFn PickNarrowRows<DType::kBF16, false>(bool, bool);
template NarrowRowsFn PickNarrowRows<DType::kBF16, true>(bool, bool);

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();
