// The channel ops' output pass (Highway per-target code): y = (x - mean) * scale + shift
// per channel, the mean and shift folded so that it is one subtraction and one FMA, over a
// contiguous run (channels-first) or down the columns of a row-major block (channels-last),
// with non-temporal stores where asked (unfenced: the caller fences once a thread). Built
// on convert-inl.h.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless but for a per-thread coefficient buffer; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_CHANNEL_APPLY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_CHANNEL_APPLY_INL_H_
#undef NORMD_KERNELS_CPU_CHANNEL_APPLY_INL_H_
#else
#define NORMD_KERNELS_CPU_CHANNEL_APPLY_INL_H_
#endif

#include <cstring>
#include <vector>

#include "hwy/cache_control.h"
#include "kernels/cpu/bf16_nan.h"
#include "kernels/cpu/channel_norm_simd.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/shifted_sums-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The output in fp32 as one subtraction and one FMA: (x - hi) * scale + (shift - lo * scale)
// with mean = hi + lo, as the row ops' epilogue. x - hi is exact near the mean (Sterbenz);
// lo is within 2^-24 of hi, so rounding the folded shift adds a part in 2^24 of |shift| and
// one in 2^48 of |hi * scale|: within docs/semantics.md's 2^-20 of the terms' magnitudes
// where the bias cancels.
// For a bf16 output their NaNs, which can carry the fp32 parameters' payloads, get zero low
// bits (bf16_nan.h).
struct FoldedShift {
  float hi, scale, shift;
};
template <DType kOut>
FoldedShift Fold(double mean, double scale, double shift) {
  const float hi = static_cast<float>(mean);
  const FoldedShift k{hi, static_cast<float>(scale),
                      static_cast<float>(shift - (mean - hi) * scale)};
  if constexpr (kOut != DType::kBF16) return k;
  return {BF16SafeNaN(k.hi), BF16SafeNaN(k.scale), BF16SafeNaN(k.shift)};
}

// A RunSumsCursor's accumulators in registers and back.
template <DType kT>
HWY_INLINE ShiftedBlocks<kT> LoadBlocks(const RunSumsCursor& c) {
  const DD dd;
  static_assert(HWY_MAX_BYTES / sizeof(double) <= RunSumsCursor::kLanes, "a vector fits");
  ShiftedBlocks<kT> b(c.shift);
  b.s0 = hn::LoadU(dd, c.acc[0]);
  b.s1 = hn::LoadU(dd, c.acc[1]);
  b.q0 = hn::LoadU(dd, c.acc[2]);
  b.q1 = hn::LoadU(dd, c.acc[3]);
  return b;
}
template <DType kT>
HWY_INLINE void StoreBlocks(const ShiftedBlocks<kT>& b, RunSumsCursor* c) {
  const DD dd;
  hn::StoreU(b.s0, dd, c->acc[0]);
  hn::StoreU(b.s1, dd, c->acc[1]);
  hn::StoreU(b.q0, dd, c->acc[2]);
  hn::StoreU(b.q1, dd, c->acc[3]);
}

// With `sums`, a block of sixteen vectors of the cursor's run is summed beside every sixteen
// vectors written: the output pass waits on memory, the sums on arithmetic, and so the sums
// take little more time there than the output pass alone (RunSumsCursor).
template <DType kT, DType kOut>
void ApplyRunT(const void* x, int64_t n, double mean, double scale, double shift, void* y,
               bool stream, const void* prefetch, RunSumsCursor* sums) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const FoldedShift k = Fold<kOut>(mean, scale, shift);
  const V vhi = hn::Set(d, k.hi), vs = hn::Set(d, k.scale), vb = hn::Set(d, k.shift);
  auto f = [&](V v) HWY_ATTR { return hn::MulAdd(hn::Sub(v, vhi), vs, vb); };
  ShiftedBlocks<kT> blocks = sums != nullptr ? LoadBlocks<kT>(*sums) : ShiftedBlocks<kT>(0.0f);
  int64_t done = sums != nullptr ? sums->done : 0;
  const int64_t sums_end = sums != nullptr ? sums->n - 16 * N : -1;
  // body(i) for i from `i` by `step` while i + step <= n; with `sums`, in blocks of sixteen
  // vectors, each beside a block of the sums while the cursor has whole blocks left.
  const auto loop = [&](int64_t & i, int64_t step, const auto& body) HWY_ATTR
      __attribute__((always_inline)) {
    for (; done <= sums_end && i + 16 * N <= n; i += 16 * N) {
      blocks.Block(Offset(sums->x, kT, done));
      done += 16 * N;
      for (int64_t j = 0; j < 16 * N; j += step) body(i + j);
    }
    for (; i + step <= n; i += step) body(i);
  };
  // [i, i + count), count < N, through stack copies: x and y end at n.
  auto part = [&](int64_t i, int64_t count) HWY_ATTR {
    alignas(64) unsigned char tx[64 * 4] = {}, ty[64 * 4];
    std::memcpy(tx, Offset(x, kT, i), static_cast<size_t>(count) * ElementSize(kT));
    StoreAs<kOut>(d, f(LoadAs<kT>(d, tx)), ty);
    std::memcpy(Offset(y, kOut, i), ty, static_cast<size_t>(count) * ElementSize(kOut));
  };
  int64_t i = 0;
  const int64_t head = stream ? StreamHead(y, ElementSize(kOut), N, n) : -1;
  const auto value = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
    if (prefetch != nullptr) hwy::Prefetch(Offset(prefetch, kT, j));
    return f(LoadAs<kT>(d, Offset(x, kT, j)));
  };
  // One vector or two (as one for f16/bf16) stored or streamed at j.
  const auto store1 = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
    StoreAs<kOut>(d, value(j), Offset(y, kOut, j));
  };
  const auto stream1 = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
    StreamAs<kOut>(d, value(j), Offset(y, kOut, j));
  };
  const auto store2 = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
    StoreAs2<kOut>(d, value(j), value(j + N), Offset(y, kOut, j));
  };
  const auto stream2 = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
    StreamAs2<kOut>(d, value(j), value(j + N), Offset(y, kOut, j));
  };
  // bf16 to bf16 on AVX2 (the target measured): 2N elements a step in pairs
  // (LoadBF16Pairs, BF16PairBits), from where y starts a whole vector of them; the rest below.
  bool pairs = false;
#if HWY_TARGET == HWY_AVX2
  if constexpr (kT == DType::kBF16 && kOut == DType::kBF16) {
    const DU16Pairs du16;
    const int64_t head2 = StreamHead(y, sizeof(uint16_t), 2 * N, n);
    const auto pair = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
      if (prefetch != nullptr) hwy::Prefetch(Offset(prefetch, kT, j));
      V a, b;
      LoadBF16Pairs(d, Offset(x, kT, j), &a, &b);
      return BF16PairBits(d, f(a), f(b));
    };
    if (stream && head2 >= 0) {
      for (; i + N <= head2; i += N) StoreAs<kOut>(d, value(i), Offset(y, kOut, i));
      if (i < head2) part(i, head2 - i);
      i = head2;
      loop(
          i, 2 * N, [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
            hn::Stream(pair(j), du16, static_cast<uint16_t*>(Offset(y, kOut, j)));
          });
    } else {
      loop(
          i, 2 * N, [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
            hn::StoreU(pair(j), du16, static_cast<uint16_t*>(Offset(y, kOut, j)));
          });
    }
    pairs = true;
  }
#endif
  if (!pairs && head >= 0) {
    // Non-temporal: the output skips the cache (no read for ownership) and leaves x's
    // channel there for the next pass.
    if (head > 0) part(0, head);
    i = head;
    if constexpr (kPairedStores<kOut>) {
      // Two vectors streamed as one (StreamAs2), from where y starts a pair. bf16
      // channels-first runs 0-8% faster, four alternating rounds (BENCHMARKS.md, issue 16,
      // thirty-fourth session); the channels-last loops below moved -0.03 to +0.03 of memcpy
      // with pairs and store one vector at a time.
      const int64_t pair = 2 * N * static_cast<int64_t>(ElementSize(kOut));
      if (i + N <= n && reinterpret_cast<uintptr_t>(Offset(y, kOut, i)) % pair != 0) {
        StreamAs<kOut>(d, value(i), Offset(y, kOut, i));
        i += N;
      }
      loop(i, 2 * N, stream2);
    }
    loop(i, N, stream1);
  }
  if constexpr (kPairedStores<kOut>) loop(i, 2 * N, store2);
  loop(i, N, store1);
  if (i < n) part(i, n - i);
  if (sums != nullptr) {
    StoreBlocks(blocks, sums);
    sums->done = done;
  }
  // No fence here: the caller fences once after its last run. A fence a run (12 KiB in the
  // benchmark's 56x56 planes) waited for the run's last lines to reach memory 2048 times a
  // call: BatchNorm inference f32 channels-first 0.86 -> 1.00 of memcpy (BENCHMARKS.md,
  // issue 16, twenty-ninth session).
}

// Rows of exactly four vectors (64 f32 channels on AVX-512), the coefficients held in
// registers; not fenced, as ApplyRunT. REQUIRES: y vector-aligned when `stream`.
template <DType kT, DType kOut>
void ApplyFourVectorRows(const void* x, int64_t rows, const float* fhi, const float* fs,
                         const float* fb, void* y, bool stream) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V h0 = hn::LoadU(d, fhi), h1 = hn::LoadU(d, fhi + N), h2 = hn::LoadU(d, fhi + 2 * N),
          h3 = hn::LoadU(d, fhi + 3 * N);
  const V s0 = hn::LoadU(d, fs), s1 = hn::LoadU(d, fs + N), s2 = hn::LoadU(d, fs + 2 * N),
          s3 = hn::LoadU(d, fs + 3 * N);
  const V b0 = hn::LoadU(d, fb), b1 = hn::LoadU(d, fb + N), b2 = hn::LoadU(d, fb + 2 * N),
          b3 = hn::LoadU(d, fb + 3 * N);
  const int64_t n = rows * 4 * N;
  const auto f = [&](int64_t i, V h, V sc, V b) HWY_ATTR __attribute__((always_inline)) {
    return hn::MulAdd(hn::Sub(LoadAs<kT>(d, Offset(x, kT, i)), h), sc, b);
  };
  if (stream) {
    for (int64_t i = 0; i < n; i += 4 * N) {
      StreamAs<kOut>(d, f(i, h0, s0, b0), Offset(y, kOut, i));
      StreamAs<kOut>(d, f(i + N, h1, s1, b1), Offset(y, kOut, i + N));
      StreamAs<kOut>(d, f(i + 2 * N, h2, s2, b2), Offset(y, kOut, i + 2 * N));
      StreamAs<kOut>(d, f(i + 3 * N, h3, s3, b3), Offset(y, kOut, i + 3 * N));
    }
    return;
  }
  for (int64_t i = 0; i < n; i += 4 * N) {
    StoreAs<kOut>(d, f(i, h0, s0, b0), Offset(y, kOut, i));
    StoreAs<kOut>(d, f(i + N, h1, s1, b1), Offset(y, kOut, i + N));
    StoreAs<kOut>(d, f(i + 2 * N, h2, s2, b2), Offset(y, kOut, i + 2 * N));
    StoreAs<kOut>(d, f(i + 3 * N, h3, s3, b3), Offset(y, kOut, i + 3 * N));
  }
}

// The same per column, the column's coefficients in fp32 once per call.
template <DType kT, DType kOut>
void ApplyColumnsT(const void* x, int64_t rows, int64_t cols, const double* mean,
                   const double* scale, const double* shift, void* y, bool stream) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t vec_cols = cols / N * N;
  // bf16 to bf16 on AVX2 (the target measured): columns [0, pair_cols) 2N a
  // step in pairs (LoadBF16Pairs, BF16PairBits), their coefficients stored in the pairs'
  // lane order (in each 2N, the even columns' then the odd ones'); the rest one vector a step.
#if HWY_TARGET == HWY_AVX2
  constexpr bool kPairs = kT == DType::kBF16 && kOut == DType::kBF16;
#else
  constexpr bool kPairs = false;
#endif
  const int64_t pair_cols = kPairs ? cols / (2 * N) * (2 * N) : 0;
  thread_local std::vector<float> coef;
  coef.resize(static_cast<size_t>(3 * vec_cols));
  float *fhi = coef.data(), *fs = fhi + vec_cols, *fb = fs + vec_cols;
  for (int64_t c = 0; c < vec_cols; ++c) {
    const FoldedShift k = Fold<kOut>(mean[c], scale[c], shift[c]);
    const int64_t m = c % (2 * N);
    const int64_t at = c < pair_cols ? c - m + (m % 2) * N + m / 2 : c;
    fhi[at] = k.hi;
    fs[at] = k.scale;
    fb[at] = k.shift;
  }
  // v with the coefficients stored at c.
  const auto apply = [&](V v, int64_t c) HWY_ATTR __attribute__((always_inline)) {
    return hn::MulAdd(hn::Sub(v, hn::LoadU(d, fhi + c)), hn::LoadU(d, fs + c),
                      hn::LoadU(d, fb + c));
  };
  const auto at = [&](const void* in, int64_t c) HWY_ATTR __attribute__((always_inline)) {
    return apply(LoadAs<kT>(d, Offset(in, kT, c)), c);
  };
  if (!kPairs && cols == 4 * N && (!stream || StreamHead(y, ElementSize(kOut), N, cols) == 0)) {
    ApplyFourVectorRows<kT, kOut>(x, rows, fhi, fs, fb, y, stream);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const void* in = Offset(x, kT, r * cols);
    void* out = Offset(y, kOut, r * cols);
    int64_t c = 0;
#if HWY_TARGET == HWY_AVX2
    if constexpr (kPairs) {
      const DU16Pairs du16;
      const auto pair = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
        V a, b;
        LoadBF16Pairs(d, Offset(in, kT, j), &a, &b);
        return BF16PairBits(d, apply(a, j), apply(b, j + N));
      };
      if (stream && StreamHead(out, sizeof(uint16_t), 2 * N, pair_cols) == 0) {
        for (; c < pair_cols; c += 2 * N) {
          hn::Stream(pair(c), du16, static_cast<uint16_t*>(Offset(out, kOut, c)));
        }
      } else {
        for (; c < pair_cols; c += 2 * N) {
          hn::StoreU(pair(c), du16, static_cast<uint16_t*>(Offset(out, kOut, c)));
        }
      }
    }
#endif
    // Non-temporal where the row starts on a vector boundary (C a multiple of the vector,
    // the usual case): the output skips the cache and its read for ownership.
    if (stream && StreamHead(Offset(out, kOut, c), ElementSize(kOut), N, vec_cols - c) == 0) {
      for (; c < vec_cols; c += N) StreamAs<kOut>(d, at(in, c), Offset(out, kOut, c));
    } else {
      for (; c < vec_cols; c += N) StoreAs<kOut>(d, at(in, c), Offset(out, kOut, c));
    }
    for (int64_t c = vec_cols; c < cols; ++c) {
      const double v = (LoadElement(kT, in, c) - mean[c]) * scale[c] + shift[c];
      StoreElement(kOut, out, c, static_cast<float>(v));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_CHANNEL_APPLY_INL_H_
