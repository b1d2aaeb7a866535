// Declares, for each SIMD target, the two passes' streamed epilogue of a large bf16 row in
// paired lanes (paired_epilogue.cc): row_epilogue-inl.h's EpilogueRun for a bf16 row read in
// place (or h formed again from it and its skip) into a bf16 output, sixteen elements a step
// as the one-loop pass reads them (LoadBF16Pairs, BF16PairBits), with the weight and bias in
// paired lanes' order (PairedParams, fused_rows-inl.h). For rows that the one-loop pass does
// not take: longer ones (1024x65536), the fused adds (h formed again). Include after
// hwy/highway.h inside a translation unit that uses foreach_target (row_norm_simd.cc,
// paired_epilogue.cc). Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_PAIRED_EPILOGUE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_PAIRED_EPILOGUE_INL_H_
#undef NORMD_KERNELS_CPU_PAIRED_EPILOGUE_INL_H_
#else
#define NORMD_KERNELS_CPU_PAIRED_EPILOGUE_INL_H_
#endif

#include <cstdint>

#include "kernels/cpu/fused_rows-inl.h"
#include "kernels/cpu/row_epilogue-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

// Streams row src's epilogue `e` into out[0, end) and returns end, the whole blocks of
// sixteen elements of the row; the caller finishes [end, n) with EpilogueStore (the same
// bits: each lane's arithmetic is EpilogueRun's, with the same form, NoMean's). `paired`:
// e's weight and bias in paired lanes' order (PairParams). e's fetches of the next row are
// made over [0, end). Returns 0, writing nothing, where out is not on a 32-byte boundary.
using PairedEpilogueFn = int64_t (*)(const void* src, int64_t n, const Epilogue& e,
                                     const PairedParams& paired, void* out);

// The instantiation for a row read as the input's dtype `in` (RowSource's typed rows) into
// an output of dtype `out`: RMSNorm's cast before the weight, the parameters present, a skip
// added last (`skip`) or h formed again (`reform`). nullptr where this target reads rows in
// order (all but AVX2), or for dtypes other than bf16 in and out.
PairedEpilogueFn PickPairedEpilogue(DType in, DType out, bool cast, bool weight, bool bias,
                                    bool skip, bool reform);

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_PAIRED_EPILOGUE_INL_H_
