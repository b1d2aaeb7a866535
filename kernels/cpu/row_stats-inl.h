// A row's statistics from LoadRow's sums (Highway per-target code, row_norm_simd.cc's):
// the row in fp32 for the rare second passes (Fp32Row, WidenToF32Impl), the mean and the
// inverse scale (RowStats), and which elements and sums a row's statistic takes (StatCols,
// StatOf). Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless but for Fp32Row's scratch, the caller's; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_ROW_STATS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_ROW_STATS_INL_H_
#undef NORMD_KERNELS_CPU_ROW_STATS_INL_H_
#else
#define NORMD_KERNELS_CPU_ROW_STATS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/row_moments-inl.h"
#include "kernels/cpu/row_pass-inl.h"
#include "kernels/cpu/row_plan.h"
#include "normd/kernels/ops.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One pass: widen and add the offset (Gemma's 1 + w). No add without an offset: w + 0.0f
// would turn a -0 weight into +0.
template <DType kT, bool kOffset>
void WidenT(const void* src, int64_t n, float offset, float* dst) {
  const D d;
  const V vo = hn::Set(d, offset);
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto widen = [&](const void* p) HWY_ATTR __attribute__((always_inline)) {
    const V v = LoadAs<kT>(d, p);
    return kOffset ? hn::Add(v, vo) : v;
  };
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::Store(widen(Offset(src, kT, i)), d, dst + i);
  if (i < n) {  // dst has room for whole vectors; src ends at n
    alignas(64) unsigned char t[64 * 4] = {};
    std::memcpy(t, Offset(src, kT, i), static_cast<size_t>(n - i) * ElementSize(kT));
    hn::Store(widen(t), d, dst + i);
  }
}

inline void WidenToF32Impl(DType t, const void* src, int64_t n, float offset, float* dst) {
  const bool o = offset != 0.0f;
  switch (t) {
    case DType::kF32:
      return o ? WidenT<DType::kF32, true>(src, n, offset, dst)
               : WidenT<DType::kF32, false>(src, n, offset, dst);
    case DType::kF16:
      return o ? WidenT<DType::kF16, true>(src, n, offset, dst)
               : WidenT<DType::kF16, false>(src, n, offset, dst);
    case DType::kBF16:
      return o ? WidenT<DType::kBF16, true>(src, n, offset, dst)
               : WidenT<DType::kBF16, false>(src, n, offset, dst);
  }
}

// The row in fp32 for the statistics' rare second passes (a shift far from the mean,
// squares beyond fp32's range): the fp32 row when there is one, else the input (plus
// alpha * skip where the epilogue forms h again) widened into `scratch` on first use.
class Fp32Row {
 public:
  Fp32Row(const float* f32, DType t, const void* x, int64_t n, float* scratch,
          const void* skip = nullptr, float alpha = 0)
      : f32_(f32), t_(t), x_(x), n_(n), scratch_(scratch), skip_(skip), alpha_(alpha) {}
  const float* get() {
    if (f32_ == nullptr) {
      if (skip_ != nullptr) {
        PickLoadRow(t_, Stat::kNone, /*skip=*/true, /*h=*/false)(x_, skip_, alpha_, n_, scratch_, 0,
                                                                 nullptr);
      } else {
        WidenToF32Impl(t_, x_, n_, 0.0f, scratch_);
      }
      f32_ = scratch_;
    }
    return f32_;
  }

 private:
  const float* f32_;
  DType t_;
  const void* x_;
  int64_t n_;
  float* scratch_;
  const void* skip_;
  float alpha_;
};

// The sum of squares LoadRow returned, redone in double when fp32 could not hold it.
inline HWY_NOINLINE double CheckedSumOfSquares(double sum, Fp32Row& row, int64_t m) {
  return SquaresLeftF32Range(sum, m) ? SumOfSquaresF64(row.get(), m) : sum;
}

// A row's statistics from LoadRow's sums (and, rarely, the row in fp32): the mean
// (LayerNorm; else 0) and the inverse scale 1/sigma, 1/rms or 1/norm.
inline HWY_NOINLINE void RowStats(const RowNormArgs& a, Fp32Row& row, const RowSums& sums,
                                  int64_t stat_cols, double* mean, double* scale) {
  const auto inverse = [&](double s) {
    return a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(s + a.eps)
                                                        : 1.0 / (std::sqrt(s) + a.eps);
  };
  *mean = 0;
  switch (a.kind) {
    case RowNormKind::kLayer: {
      double m2;
      if (!OnePassMoments(sums, a.cols, mean, &m2)) {
        const double first = sums.sum + static_cast<double>(a.cols) * sums.shift;
        RowMoments(row.get(), a.cols, first, /*f64=*/false, mean, &m2);
      }
      *scale = inverse(m2 / static_cast<double>(a.cols));
      break;
    }
    case RowNormKind::kRms:
      *scale =
          inverse(CheckedSumOfSquares(sums.sum, row, stat_cols) / static_cast<double>(stat_cols));
      break;
    case RowNormKind::kL2:
      *scale = 1.0 / std::max(std::sqrt(CheckedSumOfSquares(sums.sum, row, a.cols)), a.eps);
      break;
  }
}

// Elements entering a row's statistic (RMSNorm's partial_fraction), and the statistic.
inline int64_t StatCols(const RowNormArgs& a) {
  return a.kind == RowNormKind::kRms ? PartialCount(a.partial_fraction, a.cols) : a.cols;
}
inline Stat StatOf(const RowNormArgs& a) {
  return a.kind == RowNormKind::kLayer ? Stat::kMoments : Stat::kSumOfSquares;
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_ROW_STATS_INL_H_
