// Highway implementation of the per-channel primitives (channel_norm_simd.h).
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/channel_norm_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/aligned_allocator.h"
#include "kernels/cpu/channel_apply-inl.h"
#include "kernels/cpu/channel_norm_simd.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/row_moments-inl.h"
#include "kernels/cpu/shifted_sums-inl.h"
#include "kernels/cpu/simd_targets.h"
#include "kernels/cpu/stats.h"
// clang-format on

#include <algorithm>
#include <cstring>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Offset of the upper double half of a float vector (none on HWY_SCALAR, where WideHi is
// zero and Narrow ignores it).
HWY_INLINE int64_t HiOffset() {
#if HWY_TARGET == HWY_SCALAR
  return 0;
#else
  return static_cast<int64_t>(hn::Lanes(DD()));
#endif
}

// Runtime dtype -> template instantiation.
template <template <DType> class F, class... A>
void ByType(DType t, A... args) {
  switch (t) {
    case DType::kF32:
      return F<DType::kF32>::Run(args...);
    case DType::kF16:
      return F<DType::kF16>::Run(args...);
    case DType::kBF16:
      return F<DType::kBF16>::Run(args...);
  }
}
template <DType kT>
struct RunSumsF {
  static void Run(const void* x, int64_t n, RowSums* sums) { *sums = RunShiftedSumsF32<kT>(x, n); }
};
template <DType kT>
struct ShiftedSumsF {
  static void Run(const void* x, int64_t n, double shift, double* sum, double* squares) {
    ShiftedSums<kT>(x, n, shift, sum, squares);
  }
};

template <DType kT>
struct FinishSumsF {
  static void Run(const RunSumsCursor* c, RowSums* sums) {
    *sums = LoadBlocks<kT>(*c).Finish(c->x, c->done, c->n);
  }
};
template <DType kT>
struct RunShiftF {
  static void Run(const void* x, int64_t n, float* shift) { *shift = RunShift<kT>(x, n); }
};

// RunMoments' chunk (at most kShiftedRun elements, the buffer's size) and its fp32 buffer.
constexpr int64_t kChunk = kShiftedRun;  // stays in L2 between the two passes
static_assert(kChunk == kRunSumsMax, "RunSumsCursor sums one chunk");
float* ChunkBuffer() {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf;
  if (!buf) buf = hwy::AllocateAligned<float>(static_cast<size_t>(kChunk + 64));
  return buf.get();
}

// A chunk's mean and M2 from its fp32 one-pass sums where they are exact enough, else from
// two passes: f32 runs are read in place, others widened into the buffer (only then: the
// output pass reads x again, so a widened copy would be a store stream of twice an f16
// run's bytes for nothing).
void Fp32ChunkMoments(DType t, const void* at, int64_t len, const RowSums& sums, double* m,
                      double* m2) {
  if (OnePassMoments(sums, len, m, m2)) return;
  const float* row = static_cast<const float*>(at);
  if (t != DType::kF32) {
    WidenToF32(t, at, len, 0.0f, ChunkBuffer());
    row = ChunkBuffer();
  }
  RowMoments(row, len, sums.sum + static_cast<double>(len) * sums.shift, /*f64=*/false, m, m2);
}

void BeginRunSumsImpl(DType t, const void* x, int64_t n, RunSumsCursor* c) {
  *c = RunSumsCursor();
  c->t = t;
  c->x = x;
  c->n = n;
  ByType<RunShiftF>(t, x, n, &c->shift);
}

void FinishRunSumsImpl(RunSumsCursor* c, double* mean, double* m2) {
  RowSums sums;
  ByType<FinishSumsF>(c->t, c, &sums);
  double m, mm2;
  Fp32ChunkMoments(c->t, c->x, c->n, sums, &m, &mm2);
  ChanMoments acc;  // as RunMoments gathers its one chunk: the same bits
  acc.Merge(static_cast<double>(c->n), m, mm2);
  *mean = acc.mean();
  *m2 = acc.m2;
}

void RunMomentsImpl(DType t, const void* x, int64_t n, bool f64, double* mean, double* m2) {
  // fp32 statistics (GroupNorm, InstanceNorm) in one pass where they are exact enough;
  // double ones (BatchNorm) too, from shifted sums (shifted_sums-inl.h); where one pass is
  // not exact, two.
  const bool direct = t == DType::kF32;
  const LoadRowFn sum_pass = PickLoadRow(t, Stat::kSum, false, false, /*buf=*/!direct);
  float* const buf = ChunkBuffer();
  ChanMoments acc;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    const void* at = Offset(x, t, i);
    double m, m2;
    if (f64) {
      const double shift = LoadElement(t, at, 0);
      double sum, squares;
      ByType<ShiftedSumsF>(t, at, len, shift, &sum, &squares);
      if (!ShiftedMoments(static_cast<double>(len), shift, sum, squares, &m, &m2)) {
        const RowSums sums = sum_pass(at, nullptr, 0, len, buf, 0, nullptr);
        RowMoments(direct ? static_cast<const float*>(at) : buf, len, sums.sum,
                   /*f64=*/true, &m, &m2);
      }
    } else {
      RowSums sums;
      ByType<RunSumsF>(t, at, len, &sums);
      Fp32ChunkMoments(t, at, len, sums, &m, &m2);
    }
    acc.Merge(static_cast<double>(len), m, m2);
  }
  *mean = acc.mean();
  *m2 = acc.m2;
}

// Column statistics keep their accumulators in registers: columns go in groups of up to
// four vectors, and each group walks every row (the block is in L2). Loading and storing
// double accumulators per row made these passes a third of channels-last GroupNorm.
template <DType kT, int K>
void ColumnSumsGroup(const void* x, int64_t rows, int64_t cols, int64_t c0, double* sum) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d)), H = HiOffset();
  VD lo[K], hi[K];
  for (int j = 0; j < K; ++j) lo[j] = hi[j] = hn::Zero(dd);
  for (int64_t r = 0; r < rows; ++r) {
    const void* row = Offset(x, kT, r * cols + c0);
    for (int j = 0; j < K; ++j) {
      const V v = LoadAs<kT>(d, Offset(row, kT, j * N));
      lo[j] = hn::Add(lo[j], WideLo(v));
      hi[j] = hn::Add(hi[j], WideHi(v));
    }
  }
  for (int j = 0; j < K; ++j) {
    double* at = sum + c0 + j * N;
    hn::StoreU(hn::Add(hn::LoadU(dd, at), lo[j]), dd, at);
    if (H) hn::StoreU(hn::Add(hn::LoadU(dd, at + H), hi[j]), dd, at + H);
  }
}

template <DType kT, int K>
void ColumnSquaresGroup(const void* x, int64_t rows, int64_t cols, int64_t c0, const double* mean,
                        double* m2) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d)), H = HiOffset();
  VD lo[K], hi[K], mlo[K], mhi[K];
  for (int j = 0; j < K; ++j) {
    lo[j] = hi[j] = hn::Zero(dd);
    mlo[j] = hn::LoadU(dd, mean + c0 + j * N);
    mhi[j] = H ? hn::LoadU(dd, mean + c0 + j * N + H) : hn::Zero(dd);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const void* row = Offset(x, kT, r * cols + c0);
    for (int j = 0; j < K; ++j) {
      const V v = LoadAs<kT>(d, Offset(row, kT, j * N));
      const VD a = hn::Sub(WideLo(v), mlo[j]);
      lo[j] = hn::MulAdd(a, a, lo[j]);
      if (H) {
        const VD b = hn::Sub(WideHi(v), mhi[j]);
        hi[j] = hn::MulAdd(b, b, hi[j]);
      }
    }
  }
  for (int j = 0; j < K; ++j) {
    double* at = m2 + c0 + j * N;
    hn::StoreU(hn::Add(hn::LoadU(dd, at), lo[j]), dd, at);
    if (H) hn::StoreU(hn::Add(hn::LoadU(dd, at + H), hi[j]), dd, at + H);
  }
}

// Runs G<K> over the vector columns in groups of four vectors, the last group smaller.
template <template <int> class G, class... A>
void ByColumnGroups(int64_t vec_cols, int64_t N, A... args) {
  for (int64_t c0 = 0; c0 < vec_cols; c0 += 4 * N) {
    switch (std::min<int64_t>(4, (vec_cols - c0) / N)) {
      case 4:
        G<4>::Run(c0, args...);
        break;
      case 3:
        G<3>::Run(c0, args...);
        break;
      case 2:
        G<2>::Run(c0, args...);
        break;
      default:
        G<1>::Run(c0, args...);
        break;
    }
  }
}

template <DType kT>
struct SumsOf {
  template <int K>
  struct G {
    static void Run(int64_t c0, const void* x, int64_t rows, int64_t cols, double* sum) {
      ColumnSumsGroup<kT, K>(x, rows, cols, c0, sum);
    }
  };
};
template <DType kT>
struct SquaresOf {
  template <int K>
  struct G {
    static void Run(int64_t c0, const void* x, int64_t rows, int64_t cols, const double* mean,
                    double* m2) {
      ColumnSquaresGroup<kT, K>(x, rows, cols, c0, mean, m2);
    }
  };
};

template <DType kT>
void ColumnSumsT(const void* x, int64_t rows, int64_t cols, double* sum) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(D()));
  const int64_t vec_cols = cols / N * N;
  ByColumnGroups<SumsOf<kT>::template G>(vec_cols, N, x, rows, cols, sum);
  for (int64_t r = 0; r < rows; ++r) {
    const void* row = Offset(x, kT, r * cols);
    for (int64_t c = vec_cols; c < cols; ++c) sum[c] += LoadElement(kT, row, c);
  }
}

template <DType kT>
void ColumnCenteredSquaresT(const void* x, int64_t rows, int64_t cols, const double* mean,
                            double* m2) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(D()));
  const int64_t vec_cols = cols / N * N;
  ByColumnGroups<SquaresOf<kT>::template G>(vec_cols, N, x, rows, cols, mean, m2);
  for (int64_t r = 0; r < rows; ++r) {
    const void* row = Offset(x, kT, r * cols);
    for (int64_t c = vec_cols; c < cols; ++c) {
      const double dv = LoadElement(kT, row, c) - mean[c];
      m2[c] += dv * dv;
    }
  }
}

// Per-column mean and M2 of a rows x cols block, in pieces of at most kShiftedRun rows
// merged with Chan's formula. A piece takes one pass where every column's sums are exact
// enough: fp32 sums shifted by the columns' leading means (unless `f64`), else double sums
// shifted by the first row; where neither is (Inf or NaN, leading rows far out in a
// column's tail), a sum pass and a centred pass.
template <DType kT>
void ColumnMomentsT(const void* x, int64_t rows, int64_t cols, bool f64, double* mean, double* m2) {
  thread_local std::vector<double> scratch;
  thread_local std::vector<float> fshift;
  thread_local std::vector<ChanMoments> acc;
  scratch.resize(static_cast<size_t>(5 * cols));
  fshift.resize(static_cast<size_t>(cols));
  acc.assign(static_cast<size_t>(cols), ChanMoments());
  double *shift = scratch.data(), *sum = shift + cols, *squares = sum + cols;
  double *pm = squares + cols, *pm2 = pm + cols;
  for (int64_t r = 0; r < rows; r += kShiftedRun) {
    const int64_t n = std::min(kShiftedRun, rows - r);
    const void* block = Offset(x, kT, r * cols);
    const double dn = static_cast<double>(n);
    bool exact = !f64;
    if (exact) {
      ColumnShiftedSumsF32<kT>(block, n, cols, fshift.data(), sum, squares);
      for (int64_t c = 0; c < cols && exact; ++c) {
        exact = OnePassMoments(RowSums{sum[c], squares[c], fshift[c]}, n, &pm[c], &pm2[c]);
      }
    }
    if (!exact) {
      ColumnShiftedSums<kT>(block, n, cols, shift, sum, squares);
      exact = true;
      for (int64_t c = 0; c < cols && exact; ++c) {
        exact = ShiftedMoments(dn, shift[c], sum[c], squares[c], &pm[c], &pm2[c]);
      }
    }
    if (!exact) {
      std::fill(sum, sum + cols, 0.0);
      std::fill(pm2, pm2 + cols, 0.0);
      ColumnSumsT<kT>(block, n, cols, sum);
      for (int64_t c = 0; c < cols; ++c) pm[c] = sum[c] / dn;
      ColumnCenteredSquaresT<kT>(block, n, cols, pm, pm2);
    }
    for (int64_t c = 0; c < cols; ++c) acc[c].Merge(dn, pm[c], pm2[c]);
  }
  for (int64_t c = 0; c < cols; ++c) {
    mean[c] = acc[c].mean();
    m2[c] = acc[c].m2;
  }
}

template <DType kT>
struct ColumnMomentsF {
  static void Run(const void* x, int64_t rows, int64_t cols, bool f64, double* mean, double* m2) {
    ColumnMomentsT<kT>(x, rows, cols, f64, mean, m2);
  }
};
template <DType kT>
struct ApplyRunF {
  template <DType kOut>
  struct Out {
    static void Run(const void* x, int64_t n, double mean, double scale, double shift, void* y,
                    bool stream, const void* prefetch, RunSumsCursor* sums) {
      ApplyRunT<kT, kOut>(x, n, mean, scale, shift, y, stream, prefetch, sums);
    }
  };
  static void Run(DType out, const void* x, int64_t n, double mean, double scale, double shift,
                  void* y, bool stream, const void* prefetch, RunSumsCursor* sums) {
    ByType<Out>(out, x, n, mean, scale, shift, y, stream, prefetch, sums);
  }
};
template <DType kT>
struct ApplyColumnsF {
  template <DType kOut>
  struct Out {
    static void Run(const void* x, int64_t rows, int64_t cols, const double* mean,
                    const double* scale, const double* shift, void* y, bool stream) {
      ApplyColumnsT<kT, kOut>(x, rows, cols, mean, scale, shift, y, stream);
    }
  };
  static void Run(DType out, const void* x, int64_t rows, int64_t cols, const double* mean,
                  const double* scale, const double* shift, void* y, bool stream) {
    ByType<Out>(out, x, rows, cols, mean, scale, shift, y, stream);
  }
};

void ApplyRunImpl(DType t, const void* x, int64_t n, double mean, double scale, double shift,
                  DType out, void* y, bool stream, const void* prefetch, RunSumsCursor* sums) {
  ByType<ApplyRunF>(t, out, x, n, mean, scale, shift, y, stream, prefetch, sums);
}
void ColumnMomentsImpl(DType t, const void* x, int64_t rows, int64_t cols, bool f64, double* mean,
                       double* m2) {
  ByType<ColumnMomentsF>(t, x, rows, cols, f64, mean, m2);
}
void ApplyColumnsImpl(DType t, const void* x, int64_t rows, int64_t cols, const double* mean,
                      const double* scale, const double* shift, DType out, void* y, bool stream) {
  ByType<ApplyColumnsF>(t, out, x, rows, cols, mean, scale, shift, y, stream);
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normd::kernels::cpu {

HWY_EXPORT(RunMomentsImpl);
HWY_EXPORT(BeginRunSumsImpl);
HWY_EXPORT(FinishRunSumsImpl);
HWY_EXPORT(ApplyRunImpl);
HWY_EXPORT(ColumnMomentsImpl);
HWY_EXPORT(ApplyColumnsImpl);

void RunMoments(DType t, const void* x, int64_t n, bool f64, double* mean, double* m2) {
  NORMD_DISPATCH(RunMomentsImpl)(t, x, n, f64, mean, m2);
}
void BeginRunSums(DType t, const void* x, int64_t n, RunSumsCursor* c) {
  NORMD_DISPATCH(BeginRunSumsImpl)(t, x, n, c);
}
void FinishRunSums(RunSumsCursor* c, double* mean, double* m2) {
  NORMD_DISPATCH(FinishRunSumsImpl)(c, mean, m2);
}
void ApplyRun(DType t, const void* x, int64_t n, double mean, double scale, double shift, DType out,
              void* y, bool stream, const void* prefetch, RunSumsCursor* sums) {
  NORMD_DISPATCH(ApplyRunImpl)(t, x, n, mean, scale, shift, out, y, stream, prefetch, sums);
}
void FenceStreams() { hwy::FlushStream(); }
void ColumnMoments(DType t, const void* x, int64_t rows, int64_t cols, bool f64, double* mean,
                   double* m2) {
  NORMD_DISPATCH(ColumnMomentsImpl)(t, x, rows, cols, f64, mean, m2);
}
void ApplyColumns(DType t, const void* x, int64_t rows, int64_t cols, const double* mean,
                  const double* scale, const double* shift, DType out, void* y, bool stream) {
  NORMD_DISPATCH(ApplyColumnsImpl)(t, x, rows, cols, mean, scale, shift, out, y, stream);
}

}  // namespace normd::kernels::cpu
#endif  // HWY_ONCE
