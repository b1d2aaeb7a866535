// The row kernels' epilogue chosen at run time (Highway per-target code): the instantiation
// of row_epilogue-inl.h's EpilogueStore and EpilogueStore2 for a call's output and input
// dtypes, cast, weight, bias and residual. Include after hwy/highway.h inside a translation
// unit that uses foreach_target (row_norm_simd.cc, which calls it; row_epilogue_f32.cc,
// _f16.cc, _bf16.cc, which instantiate it). Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_ROW_EPILOGUE_PICK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_ROW_EPILOGUE_PICK_INL_H_
#undef NORMD_KERNELS_CPU_ROW_EPILOGUE_PICK_INL_H_
#else
#define NORMD_KERNELS_CPU_ROW_EPILOGUE_PICK_INL_H_
#endif

#include "kernels/cpu/row_epilogue-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

// The one- and two-row forms of one instantiation.
struct EpilogueFns {
  EpilogueStoreFn one = nullptr;
  EpilogueStore2Fn two = nullptr;
};

// The instantiation for the runtime choices. kIn matters only with a cast or a skip, or
// as the source's dtype; other epilogues share the F32 one whatever the input.
template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kW, bool kB, bool kS,
          DType kP = DType::kF32>
EpilogueFns EpilogueFnsOf() {
  return {&EpilogueStore<kOut, kIn, kSrc, kCast, kW, kB, kS, false, kP>,
          &EpilogueStore2<kOut, kIn, kSrc, kCast, kW, kB, kS, kP>};
}

template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kS>
EpilogueFns PickEpilogueStore(bool w, bool b) {
  if (w) {
    return b ? EpilogueFnsOf<kOut, kIn, kSrc, kCast, true, true, kS>()
             : EpilogueFnsOf<kOut, kIn, kSrc, kCast, true, false, kS>();
  }
  return b ? EpilogueFnsOf<kOut, kIn, kSrc, kCast, false, true, kS>()
           : EpilogueFnsOf<kOut, kIn, kSrc, kCast, false, false, kS>();
}

// The same with the weight and bias read in kIn's dtype (ParamsInPlace, row_plan.h), at
// least one of them present; instantiated only where the output's dtype is kIn's. With an
// offset (Gemma's 1 + w, a weight and no bias) the one-row form only: rows go in pairs only
// with a bias.
template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kS>
EpilogueFns PickTypedParamsEpilogue(bool w, bool b, bool offset) {
  if constexpr (kOut == kIn && kIn != DType::kF32) {
    if (offset) {
      if (!w || b) return {};
      return {&EpilogueStore<kOut, kIn, kSrc, kCast, true, false, kS, false, kIn, true>, nullptr};
    }
    if (w) {
      return b ? EpilogueFnsOf<kOut, kIn, kSrc, kCast, true, true, kS, kIn>()
               : EpilogueFnsOf<kOut, kIn, kSrc, kCast, true, false, kS, kIn>();
    }
    if (b) return EpilogueFnsOf<kOut, kIn, kSrc, kCast, false, true, kS, kIn>();
  }
  (void)w;
  (void)b;
  (void)offset;
  return {};
}

template <DType kOut, DType kIn, DType kSrc>
EpilogueFns PickTypedParamsEpilogue(bool cast, bool w, bool b, bool s, bool offset) {
  if (cast) {
    return s ? PickTypedParamsEpilogue<kOut, kIn, kSrc, true, true>(w, b, offset)
             : PickTypedParamsEpilogue<kOut, kIn, kSrc, true, false>(w, b, offset);
  }
  return s ? PickTypedParamsEpilogue<kOut, kIn, kSrc, false, true>(w, b, offset)
           : PickTypedParamsEpilogue<kOut, kIn, kSrc, false, false>(w, b, offset);
}

template <DType kOut, DType kIn, DType kSrc>
EpilogueFns PickEpilogueStore(bool cast, bool w, bool b, bool s) {
  if constexpr (kIn == DType::kF32) {
    return s ? PickEpilogueStore<kOut, kIn, kSrc, false, true>(w, b)
             : PickEpilogueStore<kOut, kIn, kSrc, false, false>(w, b);
  } else {
    if (cast) {
      return s ? PickEpilogueStore<kOut, kIn, kSrc, true, true>(w, b)
               : PickEpilogueStore<kOut, kIn, kSrc, true, false>(w, b);
    }
    if (s) return PickEpilogueStore<kOut, kIn, kSrc, false, true>(w, b);
    if constexpr (kSrc == DType::kF32) {
      return PickEpilogueStore<kOut, DType::kF32, DType::kF32, false, false>(w, b);
    } else {
      return PickEpilogueStore<kOut, kIn, kSrc, false, false>(w, b);
    }
  }
}

// The one-row epilogue that forms h again (kR) from the f16/bf16 input and skip; rows
// taking it are large and never paired.
template <DType kOut, DType kIn>
EpilogueStoreFn PickReformEpilogue(bool w, bool b) {
  constexpr DType s = kIn;
  if (w) {
    return b ? &EpilogueStore<kOut, kIn, s, false, true, true, false, true>
             : &EpilogueStore<kOut, kIn, s, false, true, false, false, true>;
  }
  return b ? &EpilogueStore<kOut, kIn, s, false, false, true, false, true>
           : &EpilogueStore<kOut, kIn, s, false, false, false, false, true>;
}

// An f16/bf16 input's epilogue (PickEpilogueStore below, which says what the flags mean).
template <DType kOut, DType kIn>
EpilogueFns PickHalfEpilogue(bool src_in, bool cast, bool w, bool b, bool s, bool reform,
                             bool typed_params, bool offset) {
  if (typed_params) {
    if (reform) return {};
    return src_in ? PickTypedParamsEpilogue<kOut, kIn, kIn>(cast, w, b, s, offset)
                  : PickTypedParamsEpilogue<kOut, kIn, DType::kF32>(cast, w, b, s, offset);
  }
  if (offset) return {};
  if (reform) return {PickReformEpilogue<kOut, kIn>(w, b), nullptr};
  return src_in ? PickEpilogueStore<kOut, kIn, kIn>(cast, w, b, s)
                : PickEpilogueStore<kOut, kIn, DType::kF32>(cast, w, b, s);
}

// `src_in`: the row is read as the input's dtype (f16/bf16 in place), else as fp32.
// `reform`: (f16/bf16, no cast, no skip added last) the row is the input plus alpha * skip,
// formed again; only the one-row form. `typed_params`: the weight and bias are in the
// input's dtype, which is the output's (ParamsInPlace, row_plan.h; never with `reform`);
// `offset`: with them, Epilogue::offset added to the weight; null functions where that
// does not hold.
template <DType kOut>
EpilogueFns PickEpilogueStore(DType in, bool src_in, bool cast, bool w, bool b, bool s, bool reform,
                              bool typed_params, bool offset) {
  switch (in) {
    case DType::kF32:
      if (typed_params || offset) return {};
      return PickEpilogueStore<kOut, DType::kF32, DType::kF32>(false, w, b, s);
    case DType::kF16:
      return PickHalfEpilogue<kOut, DType::kF16>(src_in, cast, w, b, s, reform, typed_params,
                                                 offset);
    case DType::kBF16:
      return PickHalfEpilogue<kOut, DType::kBF16>(src_in, cast, w, b, s, reform, typed_params,
                                                  offset);
  }
  return {};
}

// Instantiated once a target, an output dtype a translation unit (row_epilogue_f32.cc,
// row_epilogue_f16.cc, row_epilogue_bf16.cc), so that a build compiles them side by side:
// in row_norm_simd.cc, with LoadRow's and the narrow rows' instantiations, they made one
// file of 657 s (a Release build on a 2-core Zen 3 VM; now 157-194 s each, and 11 s left).
extern template EpilogueFns PickEpilogueStore<DType::kF32>(DType, bool, bool, bool, bool, bool,
                                                           bool, bool, bool);
extern template EpilogueFns PickEpilogueStore<DType::kF16>(DType, bool, bool, bool, bool, bool,
                                                           bool, bool, bool);
extern template EpilogueFns PickEpilogueStore<DType::kBF16>(DType, bool, bool, bool, bool, bool,
                                                            bool, bool, bool);

inline EpilogueFns PickEpilogueStore(DType out, DType in, bool src_in, bool cast, bool w, bool b,
                                     bool s, bool reform = false, bool typed_params = false,
                                     bool offset = false) {
  switch (out) {
    case DType::kF32:
      return PickEpilogueStore<DType::kF32>(in, src_in, cast, w, b, s, reform, typed_params,
                                            offset);
    case DType::kF16:
      return PickEpilogueStore<DType::kF16>(in, src_in, cast, w, b, s, reform, typed_params,
                                            offset);
    case DType::kBF16:
      return PickEpilogueStore<DType::kBF16>(in, src_in, cast, w, b, s, reform, typed_params,
                                             offset);
  }
  return {};
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_ROW_EPILOGUE_PICK_INL_H_
