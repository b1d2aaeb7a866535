// The one-loop pass of large rows read in place (fused_rows-inl.h): row r's epilogue and row
// r+1's sums in one loop, a block of LoadRow's at a time. A translation unit of its own,
// which finishes the sums itself rather than resuming LoadRow: a first form, in
// row_norm_simd.cc with LoadRow made resumable, took that file's compile from about 10 to
// 17 minutes and 14 GB (BENCHMARKS.md, issue 16, thirtieth session); this file compiles in
// 15 s beside it (thirty-first session).
//
// Why one loop: a large bf16 LayerNorm row spends about as long in its statistics pass
// (reading) as in its epilogue (computing and writing), and the two took turns; in one loop
// the reads of the next row overlap the stores of this one, as in a copy.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/fused_rows.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/fused_rows-inl.h"
// clang-format on

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/aligned_scratch.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/row_plan.h"
#include "kernels/cpu/simd_targets.h"
#include "kernels/cpu/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Only where vectors are at least 256 bits: narrower targets are fallbacks that no large
// deployment runs, and each instantiation here costs compile time in every build.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// src[0, n) in paired lanes' order into dst[0, n); a last block of fewer than 2 * Lanes(D)
// elements as it is.
void PairLanes(const float* src, int64_t n, float* dst) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(D()));
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    for (int64_t m = 0; m < N; ++m) {
      dst[i + m] = src[i + 2 * m];
      dst[i + N + m] = src[i + 2 * m + 1];
    }
  }
  for (; i < n; ++i) dst[i] = src[i];
}

const PairedParams* PairParams(DType t, const float* weight, const float* bias, int64_t n,
                               PairedParams* out) {
  // The targets whose pass reads rows of t in paired lanes: AVX2, bf16.
  if (HWY_TARGET != HWY_AVX2 || t != DType::kBF16) return nullptr;
  thread_local AlignedScratch scratch;
  float* const at = scratch.Reserve(static_cast<size_t>(2 * n));
  if (weight != nullptr) PairLanes(weight, n, at);
  if (bias != nullptr) PairLanes(bias, n, at + n);
  *out = {weight != nullptr ? at : nullptr, bias != nullptr ? at + n : nullptr};
  return out;
}

// kC: the normalized value rounded to kT before the weight (cast_before_weight).
// kR: a residual added first (FusedAdd), kH: with the next row's h streamed out.
template <DType kT, Stat kStat, bool kW, bool kB, bool kS, bool kC, bool kR = false,
          bool kH = false>
FusedSpan FusedRowPair(const void* x, const void* next, int64_t n, int64_t m, const Epilogue& e,
                       const PairedParams* paired, void* y, RowSums* next_sums,
                       const FusedAdd& add) {
  constexpr bool moments = kStat == Stat::kMoments;
  // LoadRow's blocks: f16/bf16 moments in sixteen vectors, f32 moments and sums of squares
  // in eight.
  constexpr bool tree16 = moments && kT != DType::kF32;
  constexpr int kVectors = tree16 ? 16 : 8;
  // EpilogueStore's form: with a mean (kM) for rows with a bias or a mean, else without.
  // This loop has the form of its statistic; a row that would take the other does nothing
  // here (a LayerNorm row without a bias whose mean is exactly zero).
  constexpr bool kM = moments;
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t block = kVectors * N;
  if (n % block != 0 || n == 0 || (kB || !NoMean(e)) != kM) return {};
  // Partial statistics (RMSNorm's): whole blocks, and no h to write beyond them.
  if (m != n && (m % block != 0 || m <= 0 || m > n || moments || kR)) return {};
  const int64_t head = StreamHead(y, ElementSize(kT), N, n);
  if (head < 0) return {};
  void* const next_h = add.next_h;
  if (kH && reinterpret_cast<uintptr_t>(next_h) % (N * ElementSize(kT)) != 0) return {};
  const V valpha = hn::Set(d, e.alpha);
  // The next row's element i as its sums take it: x, or h = x + alpha * skip (kR).
  const auto sum_value = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    V v = LoadAs<kT>(d, Offset(next, kT, i));
    if constexpr (kR) v = ResidualAdd(valpha, LoadAs<kT>(d, Offset(add.next_skip, kT, i)), v);
    return v;
  };
  // ... and h streamed out (kH), once an element: by the blocks below, not the shift.
  const auto next_value = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    const V v = sum_value(i);
    if constexpr (kH) StreamAs<kT>(d, v, Offset(next_h, kT, i));
    return v;
  };

  // The next row's sums, as LoadRow forms them: the shift from its first eight vectors
  // (n >= 16 vectors here), the terms in blocks summed as pairwise trees into double.
  RowSums out;
  if constexpr (moments) {
    V acc = sum_value(0);
    for (int64_t j = 1; j < 8; ++j) acc = hn::Add(acc, sum_value(j * N));
    out.shift = hn::GetLane(hn::SumOfLanes(d, acc)) / static_cast<float>(8 * N);
  }
  const V neg_k = hn::Set(d, -out.shift);
  VD s0 = hn::Zero(dd), s1 = hn::Zero(dd), q0 = hn::Zero(dd), q1 = hn::Zero(dd);
  const auto term = [neg_k](V v) HWY_ATTR __attribute__((always_inline)) {
    return moments ? Shifted(v, neg_k) : hn::Mul(v, v);
  };
  const auto flush = [&](const V* c) HWY_ATTR __attribute__((always_inline)) {
    if constexpr (tree16) {
      V s, s2;
      SumTree16(c, &s, &s2);
      s0 = hn::Add(s0, WideLo(s));
      s1 = hn::Add(s1, WideHi(s));
      q0 = hn::Add(q0, WideLo(s2));
      q1 = hn::Add(q1, WideHi(s2));
    } else {  // LoadRow's eight-vector trees: the sum, and for f32 moments the squares
      const V s = SumTree8(c);
      s0 = hn::Add(s0, WideLo(s));
      s1 = hn::Add(s1, WideHi(s));
      if constexpr (moments) {
        const V s2 = SquaresTree8(c);
        q0 = hn::Add(q0, WideLo(s2));
        q1 = hn::Add(q1, WideHi(s2));
      }
    }
  };

  // This row's epilogue, as EpilogueRun forms it.
  const V vhi = hn::Set(d, e.hi), vs = hn::Set(d, e.scale);
  const V vlos = hn::Set(d, -(e.lo * e.scale));
  // Locals: y's stores could alias e. fp32: the one-loop pass never gets parameters in the
  // input's dtype (ParamsInPlace, row_plan.h: outputs in cache only).
  const float *weight = static_cast<const float*>(e.weight),
              *bias = static_cast<const float*>(e.bias);
  // kS: this row's skip, added last. The next row's (rows are contiguous) is fetched a block
  // at a time beside its input, for its epilogue in the next call, as the two passes'
  // epilogue fetches it whole (the skip is read nowhere else).
  // kR: this row's skip, added first, and the next row's, read by the sums and fetched ahead
  // of them as the input is.
  const void* skip = kR ? add.skip : e.skip;
  const int64_t ahead_bytes = FusedAheadBytes(n * static_cast<int64_t>(ElementSize(kT)));
  const uintptr_t next_skip = kS   ? reinterpret_cast<uintptr_t>(Offset(skip, kT, n))
                              : kR ? reinterpret_cast<uintptr_t>(add.next_skip) + ahead_bytes
                                   : uintptr_t{0};
  // Block k: the next row's block at i = k * block, this row's output from head + i (its
  // vector-aligned part). With a head, the last block of sums has no output beside it.
  const int64_t blocks = (n - head) / block;
  // Blocks [0, sums_end) carry the next row's sums beside this row's output; the rest of the
  // output (partial statistics) follows alone, still fetching.
  const int64_t sums_end = std::min(m, blocks * block);
  const auto value = [&](int64_t at) HWY_ATTR __attribute__((always_inline)) {
    return EpilogueValue<kT, kT, kC, kW, kB, kS, kR, kM>(
        d, Offset(x, kT, at), vhi, vs, vlos, kW ? hn::LoadU(d, weight + at) : hn::Zero(d),
        kB ? hn::LoadU(d, bias + at) : hn::Zero(d), valpha,
        kS || kR ? Offset(skip, kT, at) : nullptr);
  };
  // The sums' input FusedAheadBytes ahead of them fetched into L2, a line at a time
  // (row_plan.h): the hardware's prefetch alone kept this loop well below a copy's speed.
  // Past the last row the fetches touch memory that is not read; a prefetch cannot fault.
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(next) + ahead_bytes;
  const int64_t block_bytes = block * static_cast<int64_t>(ElementSize(kT));
  // The lines of one block's worth of elements from element i of `base`.
  const auto lines = [&](uintptr_t base, int64_t i) HWY_ATTR __attribute__((always_inline)) {
    const uintptr_t at = base + static_cast<uintptr_t>(i) * ElementSize(kT);
    for (int64_t l = 0; l < block_bytes; l += 64) {
      PrefetchL2(reinterpret_cast<const void*>(at + static_cast<uintptr_t>(l)));
    }
  };
  const auto fetch = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    lines(ahead, i);
    if constexpr (kS || kR) lines(next_skip, i);
  };
  bool in_pairs = false;
#if HWY_TARGET == HWY_AVX2
  // bf16 in paired lanes (PairedParams, LoadBF16Pairs and BF16PairBits): from y's first
  // element, on a pair of vectors. One thread, five alternating rounds on a Zen 3 VM
  // (BENCHMARKS.md, issue 16, fiftieth session), median ratio to memcpy: LayerNorm bf16
  // 4096x4096 0.51 -> 0.58, 16384x1024 0.54 -> 0.56; RMSNorm 0.62 -> 0.67, 0.64 -> 0.68.
  if constexpr (kT == DType::kBF16 && !kR) {
    in_pairs =
        paired != nullptr && head == 0 && m == n && reinterpret_cast<uintptr_t>(y) % (4 * N) == 0;
    if (in_pairs) {
      const __m256i zero = _mm256_setzero_si256();
      const float *pw = paired->weight, *pb = paired->bias;
      for (int64_t i = 0; i < blocks * block; i += block) {
        fetch(i);
        V c[kVectors];
#pragma GCC unroll 16
        for (int j = 0; j < kVectors; j += 2) {
          // The sums' terms in order (LoadRow's bits): one lane permute and two unpacks
          // widen sixteen, where PromoteTo took two instructions a vector.
          const __m256i in = _mm256_permute4x64_epi64(
              _mm256_loadu_si256(static_cast<const __m256i*>(Offset(next, kT, i + j * N))), 0xd8);
          c[j] = term(V{_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, in))});
          c[j + 1] = term(V{_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, in))});
          const int64_t at = i + j * N;
          hn::Stream(EpiloguePairBits<kC, kW, kB, kS, false, kM>(d, x, skip, pw, pb, at, vhi, vs,
                                                                 vlos, valpha),
                     DU16Pairs(), static_cast<uint16_t*>(Offset(y, kT, at)));
        }
        flush(c);
      }
    }
  }
#endif
  (void)paired;
  // Pairs of vectors streamed as one (StreamAs2) where y's aligned part starts on a pair.
  const bool stream_pairs =
      kPairedStores<kT> &&
      reinterpret_cast<uintptr_t>(Offset(y, kT, head)) % (2 * N * ElementSize(kT)) == 0;
  if (in_pairs) {
    // Done above; the rest of the sums below.
  } else if (stream_pairs) {
    for (int64_t i = 0; i < sums_end; i += block) {
      fetch(i);
      V c[kVectors];
      // Unrolled, so that the array becomes registers (GCC keeps it in memory otherwise).
#pragma GCC unroll 16
      for (int j = 0; j < kVectors; j += 2) {
        c[j] = term(next_value(i + j * N));
        c[j + 1] = term(next_value(i + (j + 1) * N));
        const int64_t at = head + i + j * N;
        StreamAs2<kT>(d, value(at), value(at + N), Offset(y, kT, at));
      }
      flush(c);
    }
  } else {
    for (int64_t i = 0; i < sums_end; i += block) {
      fetch(i);
      V c[kVectors];
#pragma GCC unroll 16
      for (int j = 0; j < kVectors; ++j) {
        c[j] = term(next_value(i + j * N));
        const int64_t at = head + i + j * N;
        StreamAs<kT>(d, value(at), Offset(y, kT, at));
      }
      flush(c);
    }
  }
  // Partial statistics: the rest of this row's output, the next row fetched on (its epilogue
  // reads all of it).
  for (int64_t i = sums_end; i < blocks * block; i += block) {
    fetch(i);
    if (stream_pairs) {
#pragma GCC unroll 8
      for (int j = 0; j < kVectors; j += 2) {
        const int64_t at = head + i + j * N;
        StreamAs2<kT>(d, value(at), value(at + N), Offset(y, kT, at));
      }
    } else {
#pragma GCC unroll 16
      for (int j = 0; j < kVectors; ++j) {
        const int64_t at = head + i + j * N;
        StreamAs<kT>(d, value(at), Offset(y, kT, at));
      }
    }
  }
  for (int64_t i = blocks * block; i < m; i += block) {
    V c[kVectors];
#pragma GCC unroll 16
    for (int j = 0; j < kVectors; ++j) c[j] = term(next_value(i + j * N));
    flush(c);
  }
  out.sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  if constexpr (moments) out.squares = hn::GetLane(hn::SumOfLanes(dd, hn::Add(q0, q1)));
  *next_sums = out;
  (void)weight;
  (void)bias;
  (void)skip;
  (void)next_skip;
  (void)next_h;
  return {head, head + blocks * block};
}

template <DType kT, Stat kStat, bool kS, bool kC>
FusedRowPairFn PickFusedRowPairT(bool w, bool b) {
  if (w) {
    return b ? &FusedRowPair<kT, kStat, true, true, kS, kC>
             : &FusedRowPair<kT, kStat, true, false, kS, kC>;
  }
  return b ? &FusedRowPair<kT, kStat, false, true, kS, kC>
           : &FusedRowPair<kT, kStat, false, false, kS, kC>;
}

template <DType kT, Stat kStat, bool kC>
FusedRowPairFn PickFusedRowPairT(bool w, bool b, bool skip) {
  return skip ? PickFusedRowPairT<kT, kStat, true, kC>(w, b)
              : PickFusedRowPairT<kT, kStat, false, kC>(w, b);
}

FusedRowPairFn PickFusedRowPair(DType t, Stat stat, bool weight, bool bias, bool skip, bool cast,
                                bool add_first, bool h) {
  if (add_first) {
    // The fused adds' forms in f32 (OneLoopAddFits, row_plan.h): RMSNorm with a weight,
    // LayerNorm with a weight and a bias; with h (without it an f32 row goes through the row
    // buffer, not in place: RowSource).
    constexpr DType kF = DType::kF32;
    if (t != kF || skip || cast || !h) return nullptr;
    if (stat == Stat::kMoments && weight && bias) {
      return &FusedRowPair<kF, Stat::kMoments, true, true, false, false, true, true>;
    }
    if (stat == Stat::kSumOfSquares && weight && !bias) {
      return &FusedRowPair<kF, Stat::kSumOfSquares, true, false, false, false, true, true>;
    }
    return nullptr;
  }
  // The cast (cast_before_weight) is RMSNorm's and rounds to f16/bf16: instantiated for sums
  // of squares of those dtypes only.
  constexpr Stat kMo = Stat::kMoments, kSq = Stat::kSumOfSquares;
  if (stat != kMo && stat != kSq) return nullptr;
  if (cast && (stat != kSq || t == DType::kF32)) return nullptr;
  const bool w = weight, b = bias;
  switch (t) {
    case DType::kF16:
      if (cast) return PickFusedRowPairT<DType::kF16, kSq, true>(w, b, skip);
      return stat == kMo ? PickFusedRowPairT<DType::kF16, kMo, false>(w, b, skip)
                         : PickFusedRowPairT<DType::kF16, kSq, false>(w, b, skip);
    case DType::kBF16:
      if (cast) return PickFusedRowPairT<DType::kBF16, kSq, true>(w, b, skip);
      return stat == kMo ? PickFusedRowPairT<DType::kBF16, kMo, false>(w, b, skip)
                         : PickFusedRowPairT<DType::kBF16, kSq, false>(w, b, skip);
    case DType::kF32:
      return stat == kMo ? PickFusedRowPairT<DType::kF32, kMo, false>(w, b, skip)
                         : PickFusedRowPairT<DType::kF32, kSq, false>(w, b, skip);
  }
  return nullptr;
}

#else

FusedRowPairFn PickFusedRowPair(DType, Stat, bool, bool, bool, bool, bool, bool) { return nullptr; }
const PairedParams* PairParams(DType, const float*, const float*, int64_t, PairedParams*) {
  return nullptr;
}

#endif

// row_norm_simd.h's OneLoopSums (for tests).
bool OneLoopSumsImpl(DType t, bool moments, const void* x, const void* next, int64_t n, int64_t m,
                     void* y, double* fused, double* loaded) {
  const Stat stat = moments ? Stat::kMoments : Stat::kSumOfSquares;
  const FusedRowPairFn pass = PickFusedRowPair(t, stat, false, false, false, false);
  if (pass == nullptr) return false;
  Epilogue e;  // scale 1; a mean of 1 for moments, whose loop has the mean's form
  if (moments) e.hi = 1;
  RowSums sums;
  // Paired lanes where the target reads them (no parameters to put in their order).
  PairedParams paired;
  if (pass(x, next, n, m, e, PairParams(t, nullptr, nullptr, n, &paired), y, &sums, FusedAdd{})
          .begin < 0) {
    return false;
  }
  // As the two passes read a large row in place: nothing written to buf.
  const RowSums ref =
      PickLoadRow(t, stat, false, false, false)(next, nullptr, 1.0f, n, nullptr, m, nullptr);
  fused[0] = sums.sum, fused[1] = sums.squares, fused[2] = sums.shift;
  loaded[0] = ref.sum, loaded[1] = ref.squares, loaded[2] = ref.shift;
  return true;
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normd::kernels::cpu {

HWY_EXPORT(OneLoopSumsImpl);

bool OneLoopSums(DType t, bool moments, const void* x, const void* next, int64_t n, int64_t m,
                 void* y, double fused[3], double loaded[3]) {
  ScopedFlushDenormals flush;  // as the kernel runs
  return NORMD_DISPATCH(OneLoopSumsImpl)(t, moments, x, next, n, m, y, fused, loaded);
}

}  // namespace normd::kernels::cpu
#endif  // HWY_ONCE
