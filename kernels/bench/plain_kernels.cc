// Highway implementation of the plain kernels (plain_kernels.h). Every pass is one loop
// of whole vectors (two accumulators a sum, or one a column vector) and a scalar tail.
// foreach_target.h re-includes this file once per SIMD target and must come first.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/bench/plain_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/bench/plain_kernels.h"
#include "kernels/cpu/simd_targets.h"
// clang-format on

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu::HWY_NAMESPACE::D;
using cpu::HWY_NAMESPACE::LoadAs;
using cpu::HWY_NAMESPACE::Offset;
using cpu::HWY_NAMESPACE::PrefetchL2;
using cpu::HWY_NAMESPACE::StoreAs;
using cpu::HWY_NAMESPACE::StreamAs;
using cpu::HWY_NAMESPACE::V;

// The mean and inverse deviation of a unit's elements from fp32 sums of x - k, k the
// unit's first element, or (kRms) 0 and the inverse root mean square from fp32 sums of
// x^2: a run at a time added into two accumulators a sum (AddRun), the tails in double.
struct Stats {
  float mean, scale;
};
struct Tail {
  double sum = 0, sq = 0;  // of the elements past the last whole pair of vectors
  int64_t count = 0;       // all elements added
};
template <DType kT, bool kRms>
HWY_INLINE void AddRun(const void* x, int64_t n, float k, V& s0, V& s1, V& q0, V& q1, Tail& tail) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vk = hn::Set(d, k);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    V a = LoadAs<kT>(d, Offset(x, kT, i)), b = LoadAs<kT>(d, Offset(x, kT, i + N));
    if constexpr (!kRms) {
      a = hn::Sub(a, vk);
      b = hn::Sub(b, vk);
      s0 = hn::Add(s0, a);
      s1 = hn::Add(s1, b);
    }
    q0 = hn::MulAdd(a, a, q0);
    q1 = hn::MulAdd(b, b, q1);
  }
  for (; i < n; ++i) {
    const double c = LoadElement(kT, x, i) - k;
    tail.sum += c;
    tail.sq += c * c;
  }
  tail.count += n;
}
template <DType kT, bool kRms>
HWY_INLINE Stats StatsOf(float k, V s0, V s1, V q0, V q1, const Tail& tail, double eps) {
  const D d;
  const double n = static_cast<double>(tail.count);
  const double sum = kRms ? 0.0 : tail.sum + hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  const double sq = tail.sq + hn::GetLane(hn::SumOfLanes(d, hn::Add(q0, q1)));
  const double mc = sum / n;
  return {static_cast<float>(k + mc), static_cast<float>(1.0 / std::sqrt(sq / n - mc * mc + eps))};
}
template <DType kT, bool kRms>
HWY_INLINE Stats RunStats(const void* x, int64_t n, double eps) {
  const float k = kRms ? 0.0f : LoadElement(kT, x, 0);
  V s0 = hn::Zero(D()), s1 = s0, q0 = s0, q1 = s0;
  Tail tail;
  AddRun<kT, kRms>(x, n, k, s0, s1, q0, q1, tail);
  return StatsOf<kT, kRms>(k, s0, s1, q0, q1, tail, eps);
}

// y = ((x - mean) * scale) * w + b over n elements (kW, kB: w, b per element), streamed
// where y is vector-aligned; with kNext, `next` fetched into L2 a line for each line
// stored.
template <DType kT, bool kW, bool kB, bool kNext>
HWY_INLINE void RunOut(const void* x, int64_t n, Stats st, const float* w, const float* b,
                       const void* next, void* y) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vm = hn::Set(d, st.mean), vs = hn::Set(d, st.scale);
  const auto value = [&](int64_t i) HWY_ATTR {
    V v = hn::Mul(hn::Sub(LoadAs<kT>(d, Offset(x, kT, i)), vm), vs);
    if constexpr (kW) v = hn::Mul(v, hn::LoadU(d, w + i));
    if constexpr (kB) v = hn::Add(v, hn::LoadU(d, b + i));
    return v;
  };
  int64_t i = 0;
  if (reinterpret_cast<uintptr_t>(y) % (N * ElementSize(kT)) == 0) {
    for (; i + N <= n; i += N) {
      if constexpr (kNext) {
        if ((i * ElementSize(kT)) % 64 == 0) PrefetchL2(Offset(next, kT, i));
      }
      StreamAs<kT>(d, value(i), Offset(y, kT, i));
    }
  } else {
    for (; i + N <= n; i += N) StoreAs<kT>(d, value(i), Offset(y, kT, i));
  }
  for (; i < n; ++i) {
    float v = (LoadElement(kT, x, i) - st.mean) * st.scale;
    if (kW) v *= w[i];
    if (kB) v += b[i];
    StoreElement(kT, y, i, v);
  }
}

template <DType kT>
void RunsT(const void* x, int64_t runs, int64_t n, double eps, void* y) {
  for (int64_t r = 0; r < runs; ++r) {
    const void* xr = Offset(x, kT, r * n);
    RunOut<kT, false, false, false>(xr, n, RunStats<kT, false>(xr, n, eps), nullptr, nullptr,
                                    nullptr, Offset(y, kT, r * n));
  }
  hwy::FlushStream();
}

template <DType kT>
void SamplesT(const void* x, int64_t samples, int64_t rows, int64_t cols, double eps, void* y) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  constexpr int64_t kMaxCols = 256;
  HWY_ALIGN float mean[kMaxCols], scale[kMaxCols], sum[kMaxCols], sq[kMaxCols];
  if (cols > kMaxCols) HWY_ABORT("PlainSamples takes at most %d columns", int{kMaxCols});
  const int64_t vec_cols = cols / N * N;
  // Rows start vector-aligned where y does and a row is whole vectors.
  const size_t vbytes = static_cast<size_t>(N) * ElementSize(kT);
  const bool stream =
      reinterpret_cast<uintptr_t>(y) % vbytes == 0 && (cols * ElementSize(kT)) % vbytes == 0;
  for (int64_t s = 0; s < samples; ++s) {
    const void* xs = Offset(x, kT, s * rows * cols);
    void* ys = Offset(y, kT, s * rows * cols);
    // Column sums of x - x[0, c]: up to four vectors of columns at a time, in registers,
    // down the rows (all of them at once, in memory order, where cols <= 4 N).
    for (int64_t c0 = 0; c0 < vec_cols; c0 += 4 * N) {
      const int64_t k = std::min<int64_t>(4, (vec_cols - c0) / N);
      V vk[4], s0[4], q0[4];
      for (int j = 0; j < 4; ++j) {
        vk[j] = j < k ? LoadAs<kT>(d, Offset(xs, kT, c0 + j * N)) : hn::Zero(d);
        s0[j] = q0[j] = hn::Zero(d);
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (int j = 0; j < 4; ++j) {
          if (j < k) {
            const V a = hn::Sub(LoadAs<kT>(d, Offset(xs, kT, r * cols + c0 + j * N)), vk[j]);
            s0[j] = hn::Add(s0[j], a);
            q0[j] = hn::MulAdd(a, a, q0[j]);
          }
        }
      }
      for (int j = 0; j < k; ++j) {
        hn::Store(s0[j], d, sum + c0 + j * N);
        hn::Store(q0[j], d, sq + c0 + j * N);
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      const float k = LoadElement(kT, xs, c);
      if (c >= vec_cols) {
        sum[c] = sq[c] = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const float a = LoadElement(kT, xs, r * cols + c) - k;
          sum[c] += a;
          sq[c] += a * a;
        }
      }
      const double mc = sum[c] / static_cast<double>(rows);
      mean[c] = static_cast<float>(k + mc);
      scale[c] =
          static_cast<float>(1.0 / std::sqrt(sq[c] / static_cast<double>(rows) - mc * mc + eps));
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < vec_cols; c += N) {
        const V v =
            hn::Mul(hn::Sub(LoadAs<kT>(d, Offset(xs, kT, r * cols + c)), hn::Load(d, mean + c)),
                    hn::Load(d, scale + c));
        if (stream) {
          StreamAs<kT>(d, v, Offset(ys, kT, r * cols + c));
        } else {
          StoreAs<kT>(d, v, Offset(ys, kT, r * cols + c));
        }
      }
      for (int64_t c = vec_cols; c < cols; ++c) {
        StoreElement(kT, ys, r * cols + c,
                     (LoadElement(kT, xs, r * cols + c) - mean[c]) * scale[c]);
      }
    }
  }
  hwy::FlushStream();
}

template <DType kT>
void ChannelsT(const void* x, int64_t n, int64_t c, int64_t s, double eps, void* y) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const float k = LoadElement(kT, x, ch * s);
    V s0 = hn::Zero(D()), s1 = s0, q0 = s0, q1 = s0;
    Tail tail;
    for (int64_t b = 0; b < n; ++b) {
      AddRun<kT, false>(Offset(x, kT, (b * c + ch) * s), s, k, s0, s1, q0, q1, tail);
    }
    const Stats st = StatsOf<kT, false>(k, s0, s1, q0, q1, tail, eps);
    for (int64_t b = 0; b < n; ++b) {
      const int64_t off = (b * c + ch) * s;
      RunOut<kT, false, false, false>(Offset(x, kT, off), s, st, nullptr, nullptr, nullptr,
                                      Offset(y, kT, off));
    }
  }
  hwy::FlushStream();
}

template <DType kT>
void RmsRowsT(const void* x, const float* w, int64_t rows, int64_t cols, double eps, void* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const void* xr = Offset(x, kT, r * cols);
    RunOut<kT, true, false, false>(xr, cols, RunStats<kT, true>(xr, cols, eps), w, nullptr, nullptr,
                                   Offset(y, kT, r * cols));
  }
  hwy::FlushStream();
}

template <DType kT>
void LayerRowsT(const void* x, const float* w, const float* b, int64_t rows, int64_t cols,
                double eps, bool prefetch_next, void* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const void* xr = Offset(x, kT, r * cols);
    const Stats st = RunStats<kT, false>(xr, cols, eps);
    void* yr = Offset(y, kT, r * cols);
    if (prefetch_next && r + 1 < rows) {
      RunOut<kT, true, true, true>(xr, cols, st, w, b, Offset(x, kT, (r + 1) * cols), yr);
    } else {
      RunOut<kT, true, true, false>(xr, cols, st, w, b, nullptr, yr);
    }
  }
  hwy::FlushStream();
}

// Runtime dtype -> template instantiation.
#define NORMD_PLAIN_BY_TYPE(t, fn, ...)     \
  switch (t) {                              \
    case DType::kF32:                       \
      return fn<DType::kF32>(__VA_ARGS__);  \
    case DType::kF16:                       \
      return fn<DType::kF16>(__VA_ARGS__);  \
    case DType::kBF16:                      \
      return fn<DType::kBF16>(__VA_ARGS__); \
  }

void PlainRunsImpl(DType t, const void* x, int64_t runs, int64_t n, double eps, void* y) {
  NORMD_PLAIN_BY_TYPE(t, RunsT, x, runs, n, eps, y);
}
void PlainSamplesImpl(DType t, const void* x, int64_t samples, int64_t rows, int64_t cols,
                      double eps, void* y) {
  NORMD_PLAIN_BY_TYPE(t, SamplesT, x, samples, rows, cols, eps, y);
}
void PlainChannelsImpl(DType t, const void* x, int64_t n, int64_t c, int64_t s, double eps,
                       void* y) {
  NORMD_PLAIN_BY_TYPE(t, ChannelsT, x, n, c, s, eps, y);
}
void PlainRmsRowsImpl(DType t, const void* x, const float* w, int64_t rows, int64_t cols,
                      double eps, void* y) {
  NORMD_PLAIN_BY_TYPE(t, RmsRowsT, x, w, rows, cols, eps, y);
}
void PlainLayerRowsImpl(DType t, const void* x, const float* w, const float* b, int64_t rows,
                        int64_t cols, double eps, bool prefetch_next, void* y) {
  NORMD_PLAIN_BY_TYPE(t, LayerRowsT, x, w, b, rows, cols, eps, prefetch_next, y);
}
#undef NORMD_PLAIN_BY_TYPE

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normd::kernels::bench {

HWY_EXPORT(PlainRunsImpl);
HWY_EXPORT(PlainSamplesImpl);
HWY_EXPORT(PlainChannelsImpl);
HWY_EXPORT(PlainRmsRowsImpl);
HWY_EXPORT(PlainLayerRowsImpl);

void PlainRuns(DType t, const void* x, int64_t runs, int64_t n, double eps, void* y) {
  NORMD_DISPATCH(PlainRunsImpl)(t, x, runs, n, eps, y);
}
void PlainSamples(DType t, const void* x, int64_t samples, int64_t rows, int64_t cols, double eps,
                  void* y) {
  NORMD_DISPATCH(PlainSamplesImpl)(t, x, samples, rows, cols, eps, y);
}
void PlainChannels(DType t, const void* x, int64_t n, int64_t c, int64_t s, double eps, void* y) {
  NORMD_DISPATCH(PlainChannelsImpl)(t, x, n, c, s, eps, y);
}
void PlainRmsRows(DType t, const void* x, const float* weight, int64_t rows, int64_t cols,
                  double eps, void* y) {
  NORMD_DISPATCH(PlainRmsRowsImpl)(t, x, weight, rows, cols, eps, y);
}
void PlainLayerRows(DType t, const void* x, const float* weight, const float* bias, int64_t rows,
                    int64_t cols, double eps, bool prefetch_next, void* y) {
  NORMD_DISPATCH(PlainLayerRowsImpl)(t, x, weight, bias, rows, cols, eps, prefetch_next, y);
}

}  // namespace normd::kernels::bench
#endif  // HWY_ONCE
