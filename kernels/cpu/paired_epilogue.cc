// The two passes' streamed epilogue of a large bf16 row in paired lanes
// (paired_epilogue-inl.h). A translation unit of its own, instantiated for AVX2 only (the
// target measured), as the one-loop pass is (fused_rows.cc).
//
// Why: on AVX2 without AVX-512 a bf16 row's epilogue is bound by instructions, not memory
// (BENCHMARKS.md, issue 16, forty-seventh session). Widening sixteen bf16 in order takes
// four instructions and narrowing them four beside the rounding; in paired lanes, three and
// two. The one-loop pass took the pairs in the fiftieth session; this is the same for the
// rows that keep two passes. Two sets of four alternating rounds on a Zen 3 VM (BENCHMARKS.md,
// issue 16, fifty-first session), one thread, ratio to memcpy: LayerNorm bf16 1024x65536
// 0.38-0.41 -> 0.43-0.47, RMSNorm 0.46-0.50 -> 0.56-0.57, fused add+LayerNorm 1024x65536
// 0.45-0.54 -> 0.55-0.57, fused add+RMSNorm 4096x4096 0.57-0.59 -> 0.58-0.66.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/paired_epilogue.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/paired_epilogue-inl.h"
// clang-format on

#include <algorithm>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX2

// kR: h = alpha * skip + x formed again (ResidualAdd, as EpilogueValue does); kS: alpha *
// skip added last; kM: EpilogueRun's form with a mean.
template <bool kCast, bool kW, bool kB, bool kS, bool kR, bool kM>
int64_t PairedRun(const void* src, int64_t n, const Epilogue& e, const PairedParams& paired,
                  void* out) {
  constexpr DType kT = DType::kBF16;
  const D d;
  const DU16Pairs du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t end = n / (2 * N) * (2 * N);
  if (end == 0 || reinterpret_cast<uintptr_t>(out) % (2 * N * sizeof(uint16_t)) != 0) return 0;
  // As EpilogueRun: ((x - hi) - lo) * scale as (x - hi) * scale - lo * scale.
  const V vhi = hn::Set(d, e.hi), vs = hn::Set(d, e.scale);
  const V vlos = hn::Set(d, -(e.lo * e.scale));
  const V valpha = hn::Set(d, e.alpha);
  // Locals: stores through `out` could alias `e` and `paired` as far as the compiler knows.
  const float *weight = paired.weight, *bias = paired.bias;
  const void* skip = e.skip;
  const auto pair = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    hn::Stream(EpiloguePairBits<kCast, kW, kB, kS, kR, kM>(d, src, skip, weight, bias, i, vhi, vs,
                                                           vlos, valpha),
               du16, static_cast<uint16_t*>(Offset(out, kT, i)));
  };
  // EpilogueRun's fetches of the next row: a line (32 bf16) a step, the input's first
  // prefetch_count elements and the skip's (all of it where it is added last).
  const char* prefetch = e.prefetch;
  const int64_t psize = e.prefetch_size;
  const int64_t pcount = prefetch != nullptr ? e.prefetch_count : 0;
  const char* pskip = e.prefetch_skip;
  const int64_t scount = pskip != nullptr ? (kS ? n : pcount) : 0;
  const int64_t fetch_end = std::max(pcount, scount);
  int64_t i = 0;
  for (; i + 4 * N <= end && i < fetch_end; i += 4 * N) {
    if (i < pcount) PrefetchL2(prefetch + i * psize);
    if (i < scount) PrefetchL2(pskip + i * psize);
    pair(i);
    pair(i + 2 * N);
  }
  for (; i < end; i += 2 * N) pair(i);
  (void)weight;
  (void)bias;
  (void)skip;
  return end;
}

// EpilogueStore's choice of form: without a mean where there is no bias and NoMean holds.
template <bool kCast, bool kW, bool kB, bool kS, bool kR>
int64_t PairedEpilogue(const void* src, int64_t n, const Epilogue& e, const PairedParams& paired,
                       void* out) {
  if constexpr (!kB) {
    if (NoMean(e)) return PairedRun<kCast, kW, kB, kS, kR, false>(src, n, e, paired, out);
  }
  return PairedRun<kCast, kW, kB, kS, kR, true>(src, n, e, paired, out);
}

template <bool kCast, bool kS, bool kR>
PairedEpilogueFn PickPairedT(bool w, bool b) {
  if (w) {
    return b ? &PairedEpilogue<kCast, true, true, kS, kR>
             : &PairedEpilogue<kCast, true, false, kS, kR>;
  }
  return b ? &PairedEpilogue<kCast, false, true, kS, kR>
           : &PairedEpilogue<kCast, false, false, kS, kR>;
}

PairedEpilogueFn PickPairedEpilogue(DType in, DType out, bool cast, bool weight, bool bias,
                                    bool skip, bool reform) {
  if (in != DType::kBF16 || out != DType::kBF16) return nullptr;
  // As PickEpilogueStore: h formed again without a cast or a skip added last.
  if (reform) return cast || skip ? nullptr : PickPairedT<false, false, true>(weight, bias);
  if (cast) {
    return skip ? PickPairedT<true, true, false>(weight, bias)
                : PickPairedT<true, false, false>(weight, bias);
  }
  return skip ? PickPairedT<false, true, false>(weight, bias)
              : PickPairedT<false, false, false>(weight, bias);
}

#else

PairedEpilogueFn PickPairedEpilogue(DType, DType, bool, bool, bool, bool, bool) { return nullptr; }

#endif

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();
