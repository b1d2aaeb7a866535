// SIMD element conversions of the CPU kernels (Highway per-target code): exact
// conversions between f32 vectors and f32/f16/bf16 memory (round to nearest even, NaN kept
// quiet: for bf16, the NaNs RoundBF16Bits says; f16 overflow to Inf), and float <-> double
// widening.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_CONVERT_INL_H_
#undef NORMD_KERNELS_CPU_CONVERT_INL_H_
#else
#define NORMD_KERNELS_CPU_CONVERT_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "normd/kernels/dtype.h"

// AVX3_DL here also means AVX512_BF16 (Zen 4, Sapphire Rapids): one vcvtneps2bf16 rounds
// sixteen floats to bf16 where AVX3 needs nine instructions, most of a bf16 epilogue's
// work. Every SIMD translation unit includes this header after highway.h and before its
// own HWY_BEFORE_NAMESPACE, so the extended target string covers all of its AVX3_DL code
// and lambdas (HWY_ATTR). CPUs with AVX3_DL and no AVX512_BF16 (Ice Lake) are steered to
// AVX3 at run time (EnsureSimdTargets, simd_targets.h). A static-only build (-march=native) uses it
// only where the compiler was told the machine has it.
#undef NORMD_NATIVE_BF16
#if HWY_TARGET == HWY_AVX3_DL && (!defined(HWY_COMPILE_ONLY_STATIC) || defined(__AVX512BF16__))
#define NORMD_NATIVE_BF16 1
#undef HWY_TARGET_STR
#define HWY_TARGET_STR                                            \
  HWY_TARGET_STR_AVX3                                             \
  ",vpclmulqdq,avx512vbmi,avx512vbmi2,vaes,avxvnni,avx512bitalg," \
  "avx512vpopcntdq,avx512bf16"
#else
#define NORMD_NATIVE_BF16 0
#endif

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using DU16 = hn::Rebind<uint16_t, D>;
using DF16 = hn::Rebind<hwy::float16_t, D>;
using DBF16 = hn::Rebind<hwy::bfloat16_t, D>;

// ---- float <-> double: a float vector is two double vectors (one on HWY_SCALAR) -------

#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, D>;
using VD = hn::Vec<DD>;
HWY_INLINE VD WideLo(V v) { return hn::PromoteTo(DD(), v); }
HWY_INLINE VD WideHi(V) { return hn::Zero(DD()); }
HWY_INLINE V Narrow(VD /*hi*/, VD lo) { return hn::DemoteTo(D(), lo); }
#else
using DD = hn::Repartition<double, D>;
using VD = hn::Vec<DD>;
using DH = hn::Half<D>;
HWY_INLINE VD WideLo(V v) { return hn::PromoteTo(DD(), hn::LowerHalf(DH(), v)); }
HWY_INLINE VD WideHi(V v) { return hn::PromoteTo(DD(), hn::UpperHalf(DH(), v)); }
HWY_INLINE V Narrow(VD hi, VD lo) {
  return hn::Combine(D(), hn::DemoteTo(DH(), hi), hn::DemoteTo(DH(), lo));
}
#endif

// h = alpha * skip + x rounded once to fp32, as docs/semantics.md forms a residual add: an
// FMA where the target has one; elsewhere (SSSE3, SSE4, the scalar target: Highway's MulAdd
// there rounds the product, then the sum) in double, the product exact and the sum rounded
// to double and then to fp32, as the float64 reference forms it. Two roundings put h an
// ulp off now and then, and a LayerNorm of rows with mean 1e4 a part in 2^12 off with it
// (found by the adversarial rows' three-row case, thirty-first session).
HWY_INLINE V ResidualAdd(V alpha, V skip, V x) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(alpha, skip, x);
#elif HWY_TARGET == HWY_SCALAR
  // Not DemoteTo: the scalar target's clamps to the largest finite float, where h must
  // overflow to Inf (an f16 x of 1e6 is Inf already).
  const double h = static_cast<double>(hn::GetLane(alpha)) * hn::GetLane(skip) + hn::GetLane(x);
  return hn::Set(D(), static_cast<float>(h));
#else
  return Narrow(hn::MulAdd(WideHi(alpha), WideHi(skip), WideHi(x)),
                hn::MulAdd(WideLo(alpha), WideLo(skip), WideLo(x)));
#endif
}

// ---- element conversion -------------------------------------------------------------

// bfloat16 round to nearest even on the bit pattern; returns the 32-bit patterns whose
// upper halves are the bf16 values. Exact for every finite value and Inf, and for every NaN
// that is quiet with its low 16 bits zero: adding at most 0x8000 then carries nothing into
// the upper half, which is the NaN's own bf16 pattern, quiet. The kernels store only such
// NaNs: a NaN an arithmetic operation returns is quiet (x86 and Arm alike) and carries one
// operand's payload or none, and every operand's NaNs have zero low halves: bf16 inputs
// widened, the default NaN, statistics narrowed from double, and the fp32 parameters, whose
// NaNs the kernels' entry points give zero low halves for bf16 outputs (bf16_nan.h; the
// bits stored are the same). A select for other NaNs (IsNaN, Or, IfThenElse) took three of
// the ten instructions a vector of bf16 output cost on AVX2, and a register each for its
// mask and its constant (BENCHMARKS.md, issue 16, forty-seventh session).
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> RoundBF16Bits(D d, V v) {
  const hn::RebindToUnsigned<D> du;
  (void)d;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  return hn::Add(bits, hn::Add(lsb, hn::Set(du, 0x7fffu)));
}

// Highway 1.0.3's f16 conversions without F16C (SSE4 and below, and the scalar target)
// truncate instead of rounding, never produce Inf, and misread f16 Inf/NaN; those targets
// use the integer versions below, which match dtype.h exactly.
#undef NORMD_SOFT_F16
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4)
#define NORMD_SOFT_F16 1
#else
#define NORMD_SOFT_F16 0
#endif

using DU32 = hn::RebindToUnsigned<D>;
using DI32 = hn::RebindToSigned<D>;

// f32 -> f16 bit patterns (in 32-bit lanes), round to nearest even, overflow to Inf.
HWY_INLINE hn::Vec<DU32> F16BitsFromF32(D d, V v) {
  const DU32 du;
  const DI32 di;
  const auto u = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
  const auto abs = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto abs_i = hn::BitCast(di, abs);  // non-negative: signed compares are exact
  const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<13>(hn::Add(abs, hn::Add(hn::Set(du, 0xc8000fffu), odd)));
  // Subnormal results: adding 0.5 lets the FPU round at the f16 subnormal step (2^-24).
  const auto sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, abs), hn::Set(d, 0.5f))),
                           hn::Set(du, 0x3f000000u));
  const auto nan =
      hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x3ffu)));
  auto r = hn::IfThenElse(hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x38800000))), sub, normal);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x477fefff))),
                     hn::Set(du, 0x7c00u), r);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7f800000))), nan, r);
  return hn::Or(r, sign);
}

// f16 bit patterns (in 32-bit lanes) -> f32, exact, Inf and NaN kept.
HWY_INLINE V F32FromF16Bits(D d, hn::Vec<DU32> h) {
  const DU32 du;
  const DI32 di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1fu));
  const auto mant = hn::And(h, hn::Set(du, 0x3ffu));
  const auto normal =
      hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(mant));
  const auto special = hn::Or(hn::Set(du, 0x7f800000u), hn::ShiftLeft<13>(mant));
  const auto sub =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(d, hn::BitCast(di, mant)), hn::Set(d, 0x1p-24f)));
  auto r = hn::IfThenElse(hn::Eq(exp, hn::Set(du, 31u)), special, normal);
  r = hn::IfThenElse(hn::Eq(exp, hn::Zero(du)), sub, r);
  return hn::BitCast(d, hn::Or(r, sign));
}

// N elements of type t at p, widened to float.
template <DType kT>
HWY_INLINE V LoadAs(D d, const void* p) {
  constexpr DType t = kT;
  switch (t) {
    case DType::kF32:
      return hn::LoadU(d, static_cast<const float*>(p));
    case DType::kF16:
#if NORMD_SOFT_F16
      return F32FromF16Bits(
          d, hn::PromoteTo(DU32(), hn::LoadU(DU16(), static_cast<const uint16_t*>(p))));
#else
      return hn::PromoteTo(d, hn::LoadU(DF16(), static_cast<const hwy::float16_t*>(p)));
#endif
    case DType::kBF16:
      return hn::PromoteTo(d, hn::LoadU(DBF16(), static_cast<const hwy::bfloat16_t*>(p)));
  }
  return hn::Zero(d);
}

// v rounded (nearest even) to t, as the bits to store: f32 bits, or u16 lanes.
template <DType kT>
HWY_INLINE hn::Vec<DU16> ToHalfBits(D d, V v) {
  const DI32 di;
  if constexpr (kT == DType::kF16) {
#if NORMD_SOFT_F16
    return hn::DemoteTo(DU16(), hn::BitCast(di, F16BitsFromF32(d, v)));
#else
    return hn::BitCast(DU16(), hn::DemoteTo(DF16(), v));
#endif
  }
#if NORMD_NATIVE_BF16
  // Round to nearest even, NaN quieted (the bits RoundBF16Bits gives the NaNs it is given);
  // denormal inputs read as zero, which they cannot be here: the kernels run with denormals
  // flushed (ScopedFlushDenormals).
  (void)di;
  return hn::Vec<DU16>{reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v.raw))};
#else
  return hn::DemoteTo(DU16(), hn::BitCast(di, hn::ShiftRight<16>(RoundBF16Bits(d, v))));
#endif
}

template <DType kT>
HWY_INLINE void StoreAs(D d, V v, void* p) {
  if constexpr (kT == DType::kF32) {
    hn::StoreU(v, d, static_cast<float*>(p));
  } else {
    hn::StoreU(ToHalfBits<kT>(d, v), DU16(), static_cast<uint16_t*>(p));
  }
}

// REQUIRES: p aligned to the stored vector's size.
template <DType kT>
HWY_INLINE void StreamAs(D d, V v, void* p) {
  if constexpr (kT == DType::kF32) {
    hn::Stream(v, d, static_cast<float*>(p));
  } else if constexpr (hn::MaxLanes(DU16()) * sizeof(uint16_t) >= 16) {
    hn::Stream(ToHalfBits<kT>(d, v), DU16(), static_cast<uint16_t*>(p));
  } else {
    // Under 16 bytes (SSE4 and below: four u16), Highway's Stream would write a whole
    // 16-byte register at a 16-byte aligned address: past the vector, and a fault at an
    // 8-byte aligned one. A plain store instead.
    hn::StoreU(ToHalfBits<kT>(d, v), DU16(), static_cast<uint16_t*>(p));
  }
}

// Elements before the first vector-aligned element of y (elements of esize bytes, vectors of
// N elements), at most n: where StreamAs may start. -1 when y is not even element-aligned.
HWY_INLINE int64_t StreamHead(const void* y, size_t esize, int64_t N, int64_t n) {
  const size_t align = static_cast<size_t>(N) * esize;
  const size_t mis = reinterpret_cast<uintptr_t>(y) % align;
  if (mis % esize != 0) return -1;
  return std::min<int64_t>(n, mis == 0 ? 0 : static_cast<int64_t>((align - mis) / esize));
}

// Fetches the line at p into L2 but not L1 (prefetcht1 on x86), for a later pass. The row
// epilogues fetch the next rows with it while they store: into L1 (prefetcht0), on a core
// of 32 KiB L1 (Zen 4), the fetched lines took the L1 that the rows being finished and the
// weights are read from. One thread, four alternating rounds (BENCHMARKS.md, issue 16,
// twenty-fifth session), GB/s: RMSNorm f16 4096x4096 17.2 -> 26.0, LayerNorm f16 13.6 ->
// 15.6, RMSNorm f32 16384x1024 21.5 -> 27.6; L2-norm f32 4096x4096, whose row and the next
// fit in L1 together (no weight), lost 26.5 -> 22.6, still above memcpy.
HWY_INLINE void PrefetchL2(const void* p) { __builtin_prefetch(p, 0, 2); }

// v rounded to t and widened back (cast_before_weight's intermediate rounding).
HWY_INLINE V RoundTo(D d, DType t, V v) {
  switch (t) {
    case DType::kF32:
      return v;
    case DType::kF16:
#if NORMD_SOFT_F16
      return F32FromF16Bits(d, F16BitsFromF32(d, v));
#else
      return hn::PromoteTo(d, hn::DemoteTo(DF16(), v));
#endif
    case DType::kBF16: {
#if NORMD_NATIVE_BF16
      return hn::BitCast(d,
                         hn::ShiftLeft<16>(hn::PromoteTo(DU32(), ToHalfBits<DType::kBF16>(d, v))));
#else
      const hn::RebindToUnsigned<D> du;
      return hn::BitCast(d, hn::And(RoundBF16Bits(d, v), hn::Set(du, 0xffff0000u)));
#endif
    }
  }
  return v;
}

// ---- bf16 in pairs: 2N elements as N 32-bit lanes of two ------------------------------

// The even elements (each lane's low half shifted up) and the odd ones (its high half masked)
// of the 2N bf16 at p, widened to fp32: two simple ops for 2N elements, where LoadAs takes a
// shuffle and a shift for N. Elementwise work is the same in any lane order; BF16PairBits
// puts its results back in order.
HWY_INLINE void LoadBF16Pairs(D d, const void* p, V* even, V* odd) {
  const DU32 du;
  const auto u = hn::LoadU(du, static_cast<const uint32_t*>(p));
  *even = hn::BitCast(d, hn::ShiftLeft<16>(u));
  *odd = hn::BitCast(d, hn::And(u, hn::Set(du, 0xFFFF0000u)));
}

// The 2N bf16 (round to nearest even, RoundBF16Bits) of LoadBF16Pairs' even and odd lanes,
// in memory order: a shift and a blend, where two vectors stored in order take two
// narrowing shuffles (AVX2: a pack and a lane permute for two).
// Not on the scalar target, whose one lane holds no pair of u16 lanes.
#if HWY_TARGET != HWY_SCALAR
using DU16Pairs = hn::Repartition<uint16_t, D>;
HWY_INLINE hn::Vec<DU16Pairs> BF16PairBits(D d, V even, V odd) {
  const DU16Pairs du16;
  return hn::OddEven(hn::BitCast(du16, RoundBF16Bits(d, odd)),
                     hn::BitCast(du16, hn::ShiftRight<16>(RoundBF16Bits(d, even))));
}
#endif

// v, loaded once, kept in a register for every use. GCC 12 otherwise folds the load into
// each instruction that reads v: the two-row epilogue's weight and bias, shared by two rows,
// were read from L1 once a row (six loads for two vectors of f32 output where four do, twelve
// for four of bf16 where eight do): loads a core has two of a cycle at 512 bits. The same
// bits either way. Measured on a Zen 5 VM (BENCHMARKS.md, issue 16, thirty-sixth session):
// LayerNorm f32 8x4096 0.31-0.33 -> 0.33-0.34 of memcpy, the other in-cache rows within the
// VM's spread. The empty asm says v may have changed in its register, so no use can go back
// to memory for it.
HWY_INLINE V InRegister(V v) {
#if (HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128) && \
    (defined(__GNUC__) || defined(__clang__))
  asm("" : "+v"(v.raw));
#endif
  return v;
}

HWY_INLINE const void* Offset(const void* p, DType t, int64_t i) {
  return static_cast<const char*>(p) + i * ElementSize(t);
}
HWY_INLINE void* Offset(void* p, DType t, int64_t i) {
  return static_cast<char*>(p) + i * ElementSize(t);
}

// Whether StoreAs2 and StreamAs2 store a pair of vectors as one: with AVX512_BF16 (AVX3_DL
// here) one vcvtne2ps2bf16 rounds 32 floats to bf16, where two vcvtneps2bf16 took about
// twice the work (a probe, 4096 floats in L1 rounded and stored: 171 -> 135 ns; with a
// LayerNorm epilogue's arithmetic, 500 -> 390 ns). One thread, alternating rounds of the
// kernels with and without (BENCHMARKS.md, issue 16, thirty-fourth session): bf16 rows in
// cache 3-14% faster (LayerNorm 8x4096 0.23-0.25 -> 0.26-0.27 of memcpy, fused add+RMSNorm
// 0.43-0.44 -> 0.48-0.49; RMSNorm 1x4096 521 -> 478 ns a call), channels-first channel ops
// 0-8%; large rows within the VM's spread. On AVX2 a pair of bf16 vectors is rounded, packed
// and lane-permuted as one (PackBF16). On AVX2 a streamed pair of f16 vectors (eight
// elements each) goes out as one 32-byte store (JoinF16): sixteen-byte non-temporal stores
// held the streamed f16 epilogues (RMSNorm's partial statistics f16 16384x1024: 40% of the
// epilogue's samples on the store). One thread, alternating rounds (BENCHMARKS.md, issue
// 16, fifty-second session), median of memcpy: that case 0.38-0.41 -> 0.43-0.44, at
// 4096x4096 0.35-0.48 -> 0.45-0.50, fused add+LayerNorm 16384x1024 0.45-0.53 -> 0.57-0.64,
// QK-norm 0.49-0.51 -> 0.56-0.59, GroupNorm and BatchNorm inference channels-first +0.10.
// In cache (StoreAs2) the two f16 halves keep their own stores: joined, L2 1x4096 ran
// 0.20-0.22 -> 0.18-0.19 in three sets; apart, 0.19 -> 0.21 against joined, the other f16
// rows in cache within 0.02. Elsewhere each vector is stored as StoreAs and StreamAs store
// it.
template <DType kT>
inline constexpr bool kPairedStores = ((NORMD_NATIVE_BF16 != 0 || HWY_TARGET == HWY_AVX2) &&
                                       kT == DType::kBF16) ||
                                      (HWY_TARGET == HWY_AVX2 && kT == DType::kF16);

#if HWY_TARGET == HWY_AVX2
// v0 then v1 rounded to bf16, as one vector of sixteen: one pack and one lane permute for
// both, where two DemoteTo took one of each per vector.
HWY_INLINE __m256i PackBF16(D d, V v0, V v1) {
  const __m256i lo = hn::ShiftRight<16>(RoundBF16Bits(d, v0)).raw;
  const __m256i hi = hn::ShiftRight<16>(RoundBF16Bits(d, v1)).raw;
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
}

// v0 then v1 as f16 (ToHalfBits' bits), one vector of sixteen.
HWY_INLINE __m256i JoinF16(D d, V v0, V v1) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(ToHalfBits<DType::kF16>(d, v0).raw),
                                 ToHalfBits<DType::kF16>(d, v1).raw, 1);
}
#endif

// v0 and v1 rounded to t and stored at p and the next vector's place: the same bits as two
// StoreAs (f16 as two StoreAs: kPairedStores).
template <DType kT>
HWY_INLINE void StoreAs2(D d, V v0, V v1, void* p) {
#if NORMD_NATIVE_BF16
  if constexpr (kT == DType::kBF16) {
    (void)d;
    _mm512_storeu_si512(p, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1.raw, v0.raw)));
    return;
  }
#endif
#if HWY_TARGET == HWY_AVX2
  if constexpr (kT == DType::kBF16) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), PackBF16(d, v0, v1));
    return;
  }
#endif
  StoreAs<kT>(d, v0, p);
  StoreAs<kT>(d, v1, Offset(p, kT, static_cast<int64_t>(hn::Lanes(d))));
}

// StreamAs of v0 and v1 at p and the next vector's place. REQUIRES: p aligned to the two
// stored vectors' size where kPairedStores (a whole cache line on AVX3_DL), else to one's.
template <DType kT>
HWY_INLINE void StreamAs2(D d, V v0, V v1, void* p) {
#if NORMD_NATIVE_BF16
  if constexpr (kT == DType::kBF16) {
    (void)d;
    _mm512_stream_si512(static_cast<__m512i*>(p),
                        reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1.raw, v0.raw)));
    return;
  }
#endif
#if HWY_TARGET == HWY_AVX2
  if constexpr (kT == DType::kBF16) {
    _mm256_stream_si256(static_cast<__m256i*>(p), PackBF16(d, v0, v1));
    return;
  }
  if constexpr (kT == DType::kF16) {
    _mm256_stream_si256(static_cast<__m256i*>(p), JoinF16(d, v0, v1));
    return;
  }
#endif
  StreamAs<kT>(d, v0, p);
  StreamAs<kT>(d, v1, Offset(p, kT, static_cast<int64_t>(hn::Lanes(d))));
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_CONVERT_INL_H_
