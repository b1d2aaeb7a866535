// The fused load-and-reduce pass of one row (row_pass-inl.h's LoadRow, through
// PickLoadRow<kT>), instantiated here for every SIMD target and dtype, apart from the
// kernels that call it (row_norm_simd.cc, channel_norm_simd.cc), so that a build compiles
// them side by side. Stateless; safe from any thread.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_pass.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/row_pass-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

template LoadRowFn PickLoadRow<DType::kF32>(Stat, bool, bool, bool, bool);
template LoadRowFn PickLoadRow<DType::kF16>(Stat, bool, bool, bool, bool);
template LoadRowFn PickLoadRow<DType::kBF16>(Stat, bool, bool, bool, bool);

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();
