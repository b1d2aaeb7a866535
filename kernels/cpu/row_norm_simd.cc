// Highway implementation of RowNormRows. Per row: one pass loads and widens the input into
// an fp32 row buffer that stays in L1/L2, fusing h = alpha * skip + x (and storing h) and
// accumulating the sum or sum of squares in double; LayerNorm adds a centred pass over the
// buffer; one pass computes the epilogue, converts and stores y (non-temporal when large).
// The input is read from memory once.
//
// Precision (see stats.h): values widened to fp32, every sum (mean, squares, squared
// deviations) accumulated in double; the epilogue runs in fp32 when it only multiplies, and in
// double when a bias or a residual is added after scaling (an output they nearly cancel must still
// be within one F16/BF16 ulp).
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_norm_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/row_pass-inl.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct Epilogue {
  bool center = false;  // LayerNorm: subtract the mean first
  double mean = 0, scale = 1;
  bool cast_first = false;
  DType cast_dtype = DType::kF32;
  const float* weight = nullptr;
  const float* bias = nullptr;
  const float* skip = nullptr;  // NORM_THEN_ADD: alpha * skip is added last
  double alpha = 1;
};

// The epilogue of the N elements at buf + i, in fp32: only products after the centring.
HWY_INLINE V EpilogueF32(D d, const float* buf, int64_t i, const Epilogue& e, V vhi, V vlo, V vs) {
  V v = hn::LoadU(d, buf + i);
  if (e.center) v = hn::Sub(hn::Sub(v, vhi), vlo);
  v = hn::Mul(v, vs);
  if (e.cast_first) v = RoundTo(d, e.cast_dtype, v);
  if (e.weight != nullptr) v = hn::Mul(v, hn::LoadU(d, e.weight + i));
  return v;
}

// The same in double, rounded once to fp32: a bias or residual added after the scaling
// may nearly cancel it.
HWY_INLINE V EpilogueF64(D d, const float* buf, int64_t i, const Epilogue& e, VD vmean, VD vs,
                         VD valpha) {
  const V v = hn::LoadU(d, buf + i);
  VD a = hn::Mul(hn::Sub(WideLo(v), vmean), vs);
  VD b = hn::Mul(hn::Sub(WideHi(v), vmean), vs);
  if (e.cast_first) {
    const V r = RoundTo(d, e.cast_dtype, Narrow(b, a));
    a = WideLo(r);
    b = WideHi(r);
  }
  if (e.weight != nullptr) {
    const V w = hn::LoadU(d, e.weight + i);
    a = hn::Mul(a, WideLo(w));
    b = hn::Mul(b, WideHi(w));
  }
  if (e.bias != nullptr) {
    const V c = hn::LoadU(d, e.bias + i);
    a = hn::Add(a, WideLo(c));
    b = hn::Add(b, WideHi(c));
  }
  if (e.skip != nullptr) {
    const V sk = hn::LoadU(d, e.skip + i);
    a = hn::MulAdd(valpha, WideLo(sk), a);
    b = hn::MulAdd(valpha, WideHi(sk), b);
  }
  return Narrow(b, a);
}

// out[0, n) <- epilogue(buf) converted to t. With `stream`, the vector-aligned middle is
// written with non-temporal stores after a head of ordinary ones.
template <bool kWide, DType kOut>
void EpilogueStore(const float* buf, int64_t n, const Epilogue& e, void* out, bool stream) {
  constexpr DType t = kOut;
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const float hi = static_cast<float>(e.mean);
  const V vhi = hn::Set(d, hi), vlo = hn::Set(d, static_cast<float>(e.mean - hi));
  const V vs = hn::Set(d, static_cast<float>(e.scale));
  const VD vmean = hn::Set(dd, e.center ? e.mean : 0.0), vsd = hn::Set(dd, e.scale);
  const VD valpha = hn::Set(dd, e.alpha);
  // A copy in locals: stores through `out` could alias `e` as far as the compiler knows.
  const Epilogue local = e;
  // HWY_INLINE (always_inline): a call per vector would return it through memory.
  const auto compute = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    if constexpr (kWide) {
      return EpilogueF64(d, buf, i, local, vmean, vsd, valpha);
    } else {
      return EpilogueF32(d, buf, i, local, vhi, vlo, vs);
    }
  };
  alignas(64) unsigned char part[64 * 4];
  const size_t esize = ElementSize(t);
  int64_t i = 0;
  if (stream) {
    const size_t align = static_cast<size_t>(N) * esize;
    const size_t mis = reinterpret_cast<uintptr_t>(out) % align;
    if (mis % esize == 0) {
      const int64_t head =
          std::min<int64_t>(n, mis == 0 ? 0 : static_cast<int64_t>((align - mis) / esize));
      if (head > 0) {
        StoreAs<t>(d, compute(0), part);
        std::memcpy(out, part, static_cast<size_t>(head) * esize);
      }
      for (i = head; i + N <= n; i += N) StreamAs<t>(d, compute(i), Offset(out, t, i));
    }
  }
  for (; i + N <= n; i += N) StoreAs<t>(d, compute(i), Offset(out, t, i));
  if (i < n) {
    StoreAs<t>(d, compute(i), part);
    std::memcpy(Offset(out, t, i), part, static_cast<size_t>(n - i) * esize);
  }
}

using EpilogueStoreFn = void (*)(const float* buf, int64_t n, const Epilogue& e, void* out,
                                 bool stream);

template <bool kWide>
EpilogueStoreFn PickEpilogueStore(DType out) {
  switch (out) {
    case DType::kF32:
      return &EpilogueStore<kWide, DType::kF32>;
    case DType::kF16:
      return &EpilogueStore<kWide, DType::kF16>;
    case DType::kBF16:
      return &EpilogueStore<kWide, DType::kBF16>;
  }
  return nullptr;
}

// ---- the kernel -----------------------------------------------------------------------

void RowNormRowsImpl(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  const int64_t cols = a.cols;
  const size_t capacity = static_cast<size_t>(cols + kRowPad);
  thread_local hwy::AlignedFreeUniquePtr<float[]> row, skip_row;
  thread_local size_t row_capacity = 0;
  if (row_capacity < capacity) {
    row = hwy::AllocateAligned<float>(capacity);
    skip_row = hwy::AllocateAligned<float>(capacity);
    row_capacity = capacity;
  }
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  const bool norm_then_add = a.residual == ResidualPlacement::kNormThenAdd;
  const int64_t stat_cols =
      a.kind == RowNormKind::kRms ? PartialCount(a.partial_fraction, cols) : cols;
  Epilogue e;
  e.center = a.kind == RowNormKind::kLayer;
  e.cast_first = a.kind == RowNormKind::kRms && a.cast_before_weight;
  e.cast_dtype = a.x.dtype;
  e.weight = p.weight;
  e.bias = p.bias;
  e.skip = norm_then_add ? skip_row.get() : nullptr;
  e.alpha = static_cast<float>(a.alpha);
  const bool wide = p.bias != nullptr || norm_then_add;
  const DType t = a.x.dtype;

  const Stat stat = a.kind == RowNormKind::kLayer ? Stat::kSum : Stat::kSumOfSquares;
  const LoadRowFn load = PickLoadRow(t, stat, add_then_norm, a.h.present());
  const LoadRowFn load_skip = PickLoadRow(t, Stat::kNone, false, false);
  const EpilogueStoreFn epilogue =
      wide ? PickEpilogueStore<true>(a.y.dtype) : PickEpilogueStore<false>(a.y.dtype);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t base = r * cols;
    const void* next = p.stream && r + 1 < row_end ? Offset(a.x.data, t, base + cols) : nullptr;
    const double sum =
        load(Offset(a.x.data, t, base), add_then_norm ? Offset(a.skip.data, t, base) : nullptr,
             static_cast<float>(a.alpha), cols, row.get(), stat_cols,
             a.h.present() ? Offset(a.h.data, t, base) : nullptr, next);
    switch (a.kind) {
      case RowNormKind::kLayer: {
        e.mean = sum / static_cast<double>(cols);
        const float hi = static_cast<float>(e.mean);
        const double m2 =
            CenteredSumOfSquares(row.get(), cols, hi, static_cast<float>(e.mean - hi));
        const double var = m2 / static_cast<double>(cols);
        e.scale = a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(var + a.eps)
                                                               : 1.0 / (std::sqrt(var) + a.eps);
        break;
      }
      case RowNormKind::kRms: {
        const double ms = sum / static_cast<double>(stat_cols);
        e.scale = a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(ms + a.eps)
                                                               : 1.0 / (std::sqrt(ms) + a.eps);
        break;
      }
      case RowNormKind::kL2:
        e.scale = 1.0 / std::max(std::sqrt(sum), a.eps);
        break;
    }
    if (norm_then_add) {
      load_skip(Offset(a.skip.data, t, base), nullptr, 0, cols, skip_row.get(), 0, nullptr,
                nullptr);
    }
    void* y = Offset(a.y.data, a.y.dtype, base);
    epilogue(row.get(), cols, e, y, p.stream);
  }
  if (p.stream) hwy::FlushStream();
}

void WidenToF32Impl(DType t, const void* src, int64_t n, float* dst) {
  PickLoadRow(t, Stat::kNone, false, false)(src, nullptr, 0, n, dst, 0, nullptr, nullptr);
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normd::kernels::cpu {

HWY_EXPORT(RowNormRowsImpl);
HWY_EXPORT(WidenToF32Impl);

void WidenToF32(DType t, const void* src, int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenToF32Impl)(t, src, n, dst);
}

void RowNormRows(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(RowNormRowsImpl)(a, p, row_begin, row_end);
}

}  // namespace normd::kernels::cpu
#endif  // HWY_ONCE
