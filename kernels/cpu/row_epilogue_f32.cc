// The row kernels' epilogue into f32 outputs (row_epilogue_pick-inl.h's PickEpilogueStore<kF32>
// and the EpilogueStore functions it returns), instantiated here for every SIMD target:
// one output dtype a translation unit, so that a build compiles them side by side rather
// than in row_norm_simd.cc after each other. Stateless; safe from any thread.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_epilogue_f32.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/row_epilogue_pick-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

template EpilogueFns PickEpilogueStore<DType::kF32>(DType, bool, bool, bool, bool, bool, bool, bool,
                                                    bool);

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();
