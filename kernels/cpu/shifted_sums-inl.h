// One-pass statistics for the channel ops (Highway per-target code): sums of c = x - shift
// and of c^2 over a contiguous run (BatchNorm channels-first, where the fp32 sums of
// row_pass-inl.h do not suffice) or down the columns of a row-major block (channels-last
// BatchNorm, GroupNorm and InstanceNorm), read in the input's dtype. In double, the shift one
// of the data's own elements: ShiftedMoments turns them into the mean and M2 where that is
// exact, else the caller's two-pass sums decide. In fp32 groups gathered in double, the
// shift a column's leading mean (ColumnShiftedSumsF32): OnePassMoments judges them.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless; safe from any thread.
//
// Why one pass is exact here: the shift s is an element, so its distance d = mean - s
// satisfies n d^2 <= n M2 (one term of M2 is (s - mean)^2), and ShiftedMoments accepts
// only n d^2 <= 2^10 M2 (s within 32 sigma of the mean). Then the sum of c^2 is at most
// (1 + 2^10) M2, and double sums of at most 2^16 terms a lane (callers sum runs of at most
// kShiftedRun elements and blocks of at most that many rows) put M2 = sum(c^2) - sum(c)^2 / n
// within 2^16 * 2^-53 * 2^11 = 2^-26 relative and the mean within ~2^-32 sigma (worst-case
// bounds; the F32 rule asks 1e-5 of BatchNorm's outputs): as exact as the two passes they
// replace (a sum, then the squares of deviations from its mean), at one read of the data.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_SHIFTED_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_SHIFTED_SUMS_INL_H_
#undef NORMD_KERNELS_CPU_SHIFTED_SUMS_INL_H_
#else
#define NORMD_KERNELS_CPU_SHIFTED_SUMS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/row_moments-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The longest run (and the most rows of a block) summed at once; longer ones are summed
// in pieces merged with Chan's formula, which keeps the bound above.
inline constexpr int64_t kShiftedRun = int64_t{1} << 16;

// Mean and M2 from the shifted sums of n elements, when the shift lies within 32 sigma of
// the mean and the sums are finite (see the bound above); false otherwise (Inf or NaN in
// the data, or a shift far out in a tail): then the two-pass sums decide.
inline bool ShiftedMoments(double n, double shift, double sum, double squares, double* mean,
                           double* m2) {
  const double d = sum / n;
  const double q = squares - sum * d;
  if (!(std::isfinite(q) && std::isfinite(d) && n * d * d <= 1024.0 * q)) return false;
  *mean = shift + d;
  *m2 = std::max(0.0, q);
  return true;
}

// Sums over x[0, n) of c = x - shift and of c^2, in double. n <= kShiftedRun.
template <DType kT>
void ShiftedSums(const void* x, int64_t n, double shift, double* sum, double* squares) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t half = static_cast<int64_t>(hn::Lanes(dd));
  const VD vs = hn::Set(dd, shift);
  VD s0 = hn::Zero(dd), s1 = hn::Zero(dd), s2 = hn::Zero(dd), s3 = hn::Zero(dd);
  VD q0 = hn::Zero(dd), q1 = hn::Zero(dd), q2 = hn::Zero(dd), q3 = hn::Zero(dd);
  // Two vectors an iteration: four independent chains per sum hide the adds' latency.
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const V a = LoadAs<kT>(d, Offset(x, kT, i)), b = LoadAs<kT>(d, Offset(x, kT, i + N));
    const VD a0 = hn::Sub(WideLo(a), vs), b0 = hn::Sub(WideLo(b), vs);
    s0 = hn::Add(s0, a0);
    q0 = hn::MulAdd(a0, a0, q0);
    s2 = hn::Add(s2, b0);
    q2 = hn::MulAdd(b0, b0, q2);
#if HWY_TARGET != HWY_SCALAR  // there WideHi is a zero vector, not an upper half
    const VD a1 = hn::Sub(WideHi(a), vs), b1 = hn::Sub(WideHi(b), vs);
    s1 = hn::Add(s1, a1);
    q1 = hn::MulAdd(a1, a1, q1);
    s3 = hn::Add(s3, b1);
    q3 = hn::MulAdd(b1, b1, q3);
#endif
  }
  for (; i < n; i += N) {
    const int64_t live = std::min(N, n - i);
    V v;
    if (live == N) {
      v = LoadAs<kT>(d, Offset(x, kT, i));
    } else {  // through a zeroed stack copy: x ends at n
      alignas(64) unsigned char t[64 * 4] = {};
      std::memcpy(t, Offset(x, kT, i), static_cast<size_t>(live) * ElementSize(kT));
      v = LoadAs<kT>(d, t);
    }
    // Lanes past n count nothing (their c would be -shift).
    const VD lo = hn::IfThenElseZero(hn::FirstN(dd, static_cast<size_t>(std::min(live, half))),
                                     hn::Sub(WideLo(v), vs));
    s0 = hn::Add(s0, lo);
    q0 = hn::MulAdd(lo, lo, q0);
#if HWY_TARGET != HWY_SCALAR
    const VD hi =
        hn::IfThenElseZero(hn::FirstN(dd, static_cast<size_t>(std::max<int64_t>(live - half, 0))),
                           hn::Sub(WideHi(v), vs));
    s1 = hn::Add(s1, hi);
    q1 = hn::MulAdd(hi, hi, q1);
#endif
  }
  *sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  *squares = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3))));
}

// Per column c of [c0, c0 + K vectors) of a block (row stride cols), the sums of
// x - shift[c] and of its square over rows [r0, r1), added to sum[c] and squares[c]. The
// accumulators stay in registers while the group walks the rows.
template <DType kT, int K>
void ColumnShiftedSumsGroup(const void* x, int64_t r0, int64_t r1, int64_t cols, int64_t c0,
                            const double* shift, double* sum, double* squares) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t H = HWY_TARGET == HWY_SCALAR ? 0 : static_cast<int64_t>(hn::Lanes(dd));
  VD klo[K], khi[K], s[K], s_hi[K], q[K], q_hi[K];
  for (int j = 0; j < K; ++j) {
    const int64_t at = c0 + j * N;
    klo[j] = hn::LoadU(dd, shift + at);
    s[j] = hn::LoadU(dd, sum + at);
    q[j] = hn::LoadU(dd, squares + at);
    khi[j] = s_hi[j] = q_hi[j] = hn::Zero(dd);
    if (H) {
      khi[j] = hn::LoadU(dd, shift + at + H);
      s_hi[j] = hn::LoadU(dd, sum + at + H);
      q_hi[j] = hn::LoadU(dd, squares + at + H);
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const void* row = Offset(x, kT, r * cols + c0);
    // Unrolled, so that the accumulator arrays become registers (GCC kept them in memory).
#pragma GCC unroll 4
    for (int j = 0; j < K; ++j) {
      const V v = LoadAs<kT>(d, Offset(row, kT, j * N));
      const VD a = hn::Sub(WideLo(v), klo[j]);
      s[j] = hn::Add(s[j], a);
      q[j] = hn::MulAdd(a, a, q[j]);
#if HWY_TARGET != HWY_SCALAR  // there WideHi is a zero vector, not an upper half
      const VD b = hn::Sub(WideHi(v), khi[j]);
      s_hi[j] = hn::Add(s_hi[j], b);
      q_hi[j] = hn::MulAdd(b, b, q_hi[j]);
#endif
    }
  }
  for (int j = 0; j < K; ++j) {
    const int64_t at = c0 + j * N;
    hn::StoreU(s[j], dd, sum + at);
    hn::StoreU(q[j], dd, squares + at);
    if (H) {
      hn::StoreU(s_hi[j], dd, sum + at + H);
      hn::StoreU(q_hi[j], dd, squares + at + H);
    }
  }
}

// Per column c of a rows x cols block (row stride cols), shift[c] = x[0, c] and the sums
// of x - shift[c] and of its square down the column into sum[c] and squares[c]. Rows go in
// bands that fit in L1, each band's columns in groups of two vectors: memory is read in
// order, once, and each group's accumulators stay in registers for a band (a group walking
// every row read the block as strided halves, and twice). rows <= kShiftedRun.
template <DType kT>
void ColumnShiftedSums(const void* x, int64_t rows, int64_t cols, double* shift, double* sum,
                       double* squares) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(D()));
  const int64_t vec_cols = cols / N * N;
  const int64_t band =
      std::max<int64_t>(8, (32 << 10) / (cols * static_cast<int64_t>(ElementSize(kT))));
  for (int64_t c = 0; c < cols; ++c) {
    shift[c] = LoadElement(kT, x, c);
    sum[c] = squares[c] = 0;
  }
  for (int64_t r0 = 1; r0 < rows; r0 += band) {  // row 0 is the shift: its c are zero
    const int64_t r1 = std::min(rows, r0 + band);
    int64_t c = 0;
    for (; c + 2 * N <= vec_cols; c += 2 * N) {
      ColumnShiftedSumsGroup<kT, 2>(x, r0, r1, cols, c, shift, sum, squares);
    }
    for (; c < vec_cols; c += N) {
      ColumnShiftedSumsGroup<kT, 1>(x, r0, r1, cols, c, shift, sum, squares);
    }
  }
  for (int64_t c = vec_cols; c < cols; ++c) {
    for (int64_t r = 1; r < rows; ++r) {
      const double v = LoadElement(kT, x, r * cols + c) - shift[c];
      sum[c] += v;
      squares[c] += v * v;
    }
  }
}

// ---- fp32 run sums (channels-first GroupNorm, InstanceNorm, BatchNorm training) -------

// The summed terms of one 2N-element piece of a run as two float vectors, in an order of
// their own: only their sums are wanted. bf16 is read as N 32-bit lanes, each two
// elements: the low half shifted up is the first, the high half masked the second (two
// simple ops for 2N elements, where LoadAs widens N with a shuffle and a shift).
template <DType kT>
HWY_INLINE void LoadPairUnordered(const void* p, V* a, V* b) {
  const D d;
  if constexpr (kT == DType::kBF16) {
    LoadBF16Pairs(d, p, a, b);
  } else {
    *a = LoadAs<kT>(d, p);
    *b = LoadAs<kT>(d, Offset(p, kT, static_cast<int64_t>(hn::Lanes(d))));
  }
}

// RunShiftedSumsF32's shift (below): the fp32 mean of the first min(8, n / N) vectors.
template <DType kT>
float RunShift(const void* x, int64_t n) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t w = std::min<int64_t>(8, n / N);
  if (w == 0) return 0.0f;
  V acc = LoadAs<kT>(d, x);
  for (int64_t j = 1; j < w; ++j) acc = hn::Add(acc, LoadAs<kT>(d, Offset(x, kT, j * N)));
  return hn::GetLane(hn::SumOfLanes(d, acc)) / static_cast<float>(w * N);
}

// RunShiftedSumsF32's accumulators and steps, apart so that the channel ops' output pass can
// sum the next run a block at a time beside its own (ApplyRunT, RunSumsCursor): the same
// operations in the same order, so the same bits.
template <DType kT>
struct ShiftedBlocks {
  float shift;
  V neg_k;  // -shift (Shifted, row_pass-inl.h)
  VD s0, s1, q0, q1;

  explicit ShiftedBlocks(float k) : shift(k), neg_k(hn::Set(D(), -k)) {
    const DD dd;
    s0 = s1 = q0 = q1 = hn::Zero(dd);
  }
  HWY_INLINE void Flush(V t, V t2) {
    s0 = hn::Add(s0, WideLo(t));
    q0 = hn::Add(q0, WideLo(t2));
#if HWY_TARGET != HWY_SCALAR  // there WideHi is a zero vector, not an upper half
    s1 = hn::Add(s1, WideHi(t));
    q1 = hn::Add(q1, WideHi(t2));
#endif
  }
  // Sixteen vectors from `at`.
  HWY_INLINE void Block(const void* at) {
    const int64_t N = static_cast<int64_t>(hn::Lanes(D()));
    V c[16];
    // Unrolled, so that the arrays become registers (GCC keeps them in memory otherwise).
#pragma GCC unroll 8
    for (int j = 0; j < 16; j += 2) {
      LoadPairUnordered<kT>(Offset(at, kT, j * N), &c[j], &c[j + 1]);
      c[j] = Shifted(c[j], neg_k);
      c[j + 1] = Shifted(c[j + 1], neg_k);
    }
    V t, t2;
    SumTree16(c, &t, &t2);
    Flush(t, t2);
  }
  // x[i, n): the blocks left, then single vectors and the tail; the run's sums.
  RowSums Finish(const void* x, int64_t i, int64_t n) {
    const D d;
    const DD dd;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    for (; i + 16 * N <= n; i += 16 * N) Block(Offset(x, kT, i));
    for (; i + N <= n; i += N) {
      const V c = Shifted(LoadAs<kT>(d, Offset(x, kT, i)), neg_k);
      Flush(c, hn::Mul(c, c));
    }
    if (i < n) {  // through a zeroed stack copy: x ends at n
      alignas(64) unsigned char tx[64 * 4] = {};
      std::memcpy(tx, Offset(x, kT, i), static_cast<size_t>(n - i) * ElementSize(kT));
      const V c = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - i)),
                                     Shifted(LoadAs<kT>(d, tx), neg_k));
      Flush(c, hn::Mul(c, c));
    }
    RowSums out;
    out.shift = shift;
    out.sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
    out.squares = hn::GetLane(hn::SumOfLanes(dd, hn::Add(q0, q1)));
    return out;
  }
};

// The sums of c = x - shift and of c^2 over a contiguous run of n elements, for
// OnePassMoments, as LoadRow's kMoments pass sums a row (shift the fp32 mean of the first
// min(8, n / N) vectors), in fp32 blocks of sixteen vectors (a pairwise tree of four levels,
// each block's lanes then added into double) whatever the dtype, and bf16 read in pairs. The
// channel ops' statistics pass is bound by its arithmetic (on Zen 4, whose 512-bit operations take
// two cycles, as fast from memory as from L1): the wider block halves the widening of block sums to
// double, and bf16 pairs halve the conversions. The cost in accuracy: c and c^2 rounded once each
// and four roundings in the tree, so where OnePassMoments accepts the sums (the shift within sigma
// / 2 of the mean, |c| averaging at most 1.12 sigma) the mean is within 5.6 * 2^-24 sigma (2^-21.5)
// and M2 within 6.3 * 2^-24 relative, inside docs/semantics.md's 2^-20.
template <DType kT>
RowSums RunShiftedSumsF32(const void* x, int64_t n) {
  return ShiftedBlocks<kT>(RunShift<kT>(x, n)).Finish(x, 0, n);
}

// ---- fp32 column sums (GroupNorm, InstanceNorm, and BatchNorm where they suffice) -------

// How many leading rows of a block give the fp32 column sums their shifts.
inline constexpr int64_t kShiftRows = 64;

// at[0, N) += t's lanes, in double.
HWY_INLINE void AddLanes(V t, double* at) {
  const DD dd;
  hn::StoreU(hn::Add(hn::LoadU(dd, at), WideLo(t)), dd, at);
#if HWY_TARGET != HWY_SCALAR  // there WideHi is a zero vector, not an upper half
  double* hi = at + hn::Lanes(dd);
  hn::StoreU(hn::Add(hn::LoadU(dd, hi), WideHi(t)), dd, hi);
#endif
}

// Over rows [r, r + 8) of a block (row stride cols), per column c below vec_cols: the sums
// of x - shift[c] and of its square in fp32 (a pairwise tree: three roundings a lane),
// added into sum[c] and squares[c] in double, as LoadRow sums a row (row_pass-inl.h). The
// eight rows are read in order, column vector by column vector: a group of columns walking
// down a band of rows instead read memory as strided streams, and stalled on them.
template <DType kT>
HWY_INLINE void ColumnShiftedSumsF32Rows(const void* x, int64_t r, int64_t cols, int64_t vec_cols,
                                         const float* shift, double* sum, double* squares) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const void* row = Offset(x, kT, r * cols);
  // Rows r + 16 to r + 24 fetched a line at a time: the block's rows are contiguous (row
  // stride cols). A fetch per row and column vector issued two per line for f16/bf16 and
  // ran as a loop of its own, an eighth of the pass's samples; a line at a time, two sets of
  // six alternating rounds at 32x56x56x64 (BENCHMARKS.md, issue 16, seventy-first session),
  // one thread, medians: GroupNorm and InstanceNorm f16/bf16 0.35-0.43 -> 0.46-0.49 of
  // memcpy, f32 within the rounds' spread.
  // f32 rows fetched into L2 rather than L1, f16/bf16 into L1: one thread, five
  // alternating rounds at 32x56x56x64 (twenty-fifth session), GroupNorm and InstanceNorm
  // f32 15.3-16.7 -> 19.3-22.3 GB/s; f16/bf16 lost 1-24% in L2. 32 and 64 rows ahead
  // instead of 16: the same or slower (fifty-seventh session).
  const char* ahead = static_cast<const char*>(Offset(row, kT, 16 * cols));
  const int64_t ahead_bytes = 8 * cols * static_cast<int64_t>(ElementSize(kT));
  for (int64_t b = 0; b < ahead_bytes; b += 64) {
    if constexpr (kT == DType::kF32) {
      PrefetchL2(ahead + b);
    } else {
      hwy::Prefetch(ahead + b);
    }
  }
  for (int64_t c = 0; c < vec_cols; c += N) {
    const V k = hn::LoadU(d, shift + c);
    const auto dev = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
      return hn::Sub(LoadAs<kT>(d, Offset(row, kT, i * cols + c)), k);
    };
    const V a[8] = {dev(0), dev(1), dev(2), dev(3), dev(4), dev(5), dev(6), dev(7)};
    AddLanes(SumTree8(a), sum + c);
    AddLanes(SquaresTree8(a), squares + c);
  }
}

// Per column c of a rows x cols block (row stride cols): shift[c], the fp32 mean of its
// first min(rows, kShiftRows) rows (near the column's mean, so that c = x - shift is
// small), and the sums of c and c^2 down the column, in fp32 groups of eight rows added
// into double (columns past the last whole vector: in double). The caller judges the sums with
// OnePassMoments, whose bound holds here: the same three roundings of a sum, one of c, one of its
// square. rows <= kShiftedRun.
template <DType kT>
void ColumnShiftedSumsF32(const void* x, int64_t rows, int64_t cols, float* shift, double* sum,
                          double* squares) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t vec_cols = cols / N * N;
  const int64_t head = std::min(rows, kShiftRows);
  for (int64_t c = 0; c < vec_cols; c += N) {
    V acc = hn::Zero(d);
    for (int64_t i = 0; i < head; ++i) {
      acc = hn::Add(acc, LoadAs<kT>(d, Offset(x, kT, i * cols + c)));
    }
    hn::StoreU(hn::Div(acc, hn::Set(d, static_cast<float>(head))), d, shift + c);
  }
  for (int64_t c = vec_cols; c < cols; ++c) {
    float acc = 0;
    for (int64_t i = 0; i < head; ++i) acc += LoadElement(kT, x, i * cols + c);
    shift[c] = acc / static_cast<float>(head);
  }
  std::fill(sum, sum + cols, 0.0);
  std::fill(squares, squares + cols, 0.0);
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    ColumnShiftedSumsF32Rows<kT>(x, r, cols, vec_cols, shift, sum, squares);
  }
  for (; r < rows; ++r) {  // the last rows, each a vector of terms
    for (int64_t c = 0; c < vec_cols; c += N) {
      const V a = hn::Sub(LoadAs<kT>(d, Offset(x, kT, r * cols + c)), hn::LoadU(d, shift + c));
      AddLanes(a, sum + c);
      AddLanes(hn::Mul(a, a), squares + c);
    }
  }
  for (int64_t c = vec_cols; c < cols; ++c) {
    for (int64_t i = 0; i < rows; ++i) {
      const double v = LoadElement(kT, x, i * cols + c) - static_cast<double>(shift[c]);
      sum[c] += v;
      squares[c] += v * v;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_SHIFTED_SUMS_INL_H_
