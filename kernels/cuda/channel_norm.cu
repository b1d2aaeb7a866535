// CUDA BatchNorm / GroupNorm / InstanceNorm. Statistics: each statistic set (a channel
// over N x S for BatchNorm, a (sample, group) over C/G x S for GroupNorm) is split into
// `splits` chunks so that few sets still fill every SM; a block sums its chunk's
// deviations from the set's first element and their squares in double (exact differences
// of fp32 values, so the variance keeps its precision however far the data lie from 0:
// an element lies within sqrt(n) sigma of its set's mean), and a second kernel adds the
// chunks in a fixed order (deterministic) and turns each set's statistics, weight and bias
// into the apply pass's fp32 {shift, dm, scale, bias} (mean = shift + dm; scale = w /
// sqrt(var + eps)). Reads are contiguous in both layouts: channels-first sets are runs of
// contiguous elements (a plane, or a group's planes), read in 16-byte vectors; in
// channels-last data a block reads whole rows of a tile of channels, a thread a 16-byte
// vector of neighbouring channels of every few rows (PlanChannelsLast).
// The apply pass (channel_apply.cu) then reads x once.
#include "kernels/cuda/channel_common.cuh"

namespace normd::kernels::cuda {
namespace {

using channel::BiasOf;
using channel::GridFor;
using channel::kThreads;
using channel::LoadAny;
using channel::ParamsOf;
using channel::SetFirst;
using channel::WeightOf;

// Sums of deviations from a set's shift and of their squares; the count follows from the
// range a block reads.
struct Sums {
  double s1 = 0, s2 = 0;
  __device__ __forceinline__ void Add(double d) {
    s1 += d;
    s2 = fma(d, d, s2);
  }
};

// The block's sums (every warp's, in warp order) with `count`, written by thread 0 to
// out[0..3).
__device__ void BlockSumsTo(Sums m, double count, double* out) {
  __shared__ double sh[2][32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    m.s1 += __shfl_xor_sync(0xffffffffu, m.s1, o);
    m.s2 += __shfl_xor_sync(0xffffffffu, m.s2, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh[0][warp] = m.s1;
    sh[1][warp] = m.s2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Sums total;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      total.s1 += sh[0][w];
      total.s2 += sh[1][w];
    }
    out[0] = count;
    out[1] = total.s1;
    out[2] = total.s2;
  }
}

// Runs shorter than this are walked an element a thread (every thread busy); longer ones
// a run at a time in 16-byte vectors.
constexpr int64_t kVectorRun = 256;

// One block per (set k, split): blockIdx.x = k * splits + split; partials[k * splits +
// split] = (count, sum of d, sum of d^2), d = x - the set's first element. Set k is `runs`
// runs of `run_len` contiguous elements, `stride` apart: BatchNorm channels-first, a plane
// a sample; GroupNorm channels-first, one run; channels-last (where PlanChannelsLast
// declines), a group's channels a position, or a channel's one element a row.
template <int XT>
__global__ void __launch_bounds__(kThreads, 3)
    PartialStats(ChannelArgs a, int splits, FastDiv by_run_vectors, double* partials) {
  const int64_t k = blockIdx.x / splits;
  const int64_t split = blockIdx.x % splits;
  const int64_t cpg = a.groups == 0 ? 1 : a.c / a.groups;
  int64_t runs, run_len, stride;
  if (a.channels_last) {
    runs = a.groups == 0 ? a.n * a.s : a.s;
    run_len = cpg;
    stride = a.c;
  } else {
    runs = a.groups == 0 ? a.n : 1;
    run_len = cpg * a.s;
    stride = a.c * a.s;
  }
  using E = typename Dev<XT>::Elem;
  const E* x = static_cast<const E*>(a.x);
  const int64_t size = runs * run_len;
  // Chunks of whole vectors where the runs are (the vector path reads whole vectors).
  const int64_t unit = (run_len * static_cast<int64_t>(sizeof(E))) % 16 == 0 ? Dev<XT>::kVec : 1;
  const int64_t chunk = ((size / unit + splits - 1) / splits) * unit;
  const int64_t begin = split * chunk;
  const int64_t end = min(size, begin + chunk);
  const int64_t base = SetFirst(a, k);
  const double shift = Dev<XT>::Widen(x[base]);
  Sums m;
  auto add = [&](int64_t, const float* v, auto kc) {
    constexpr int K = decltype(kc)::value;
#pragma unroll
    for (int q = 0; q < K; ++q) m.Add(v[q] - shift);
  };
  constexpr int kVec = Dev<XT>::kVec;
  const bool vector_runs = (run_len * static_cast<int64_t>(sizeof(E))) % 16 == 0 &&
                           (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  if (vector_runs) {
    // Whole vectors a run, every run aligned (the set's first element is a multiple of a
    // run from x): the chunk is vectors [begin, end) / kVec of the runs laid end to end,
    // read four at a time whatever run each lies in (vector j: run j / run_vectors).
    const int64_t run_vectors = run_len / kVec, stride_vectors = stride / kVec;
    const uint4* xv = reinterpret_cast<const uint4*>(x + base);
    const int64_t vb = begin / kVec, ve = end / kVec;  // chunks are whole vectors: see below
    auto at = [&](int64_t j) {
      const int64_t r = by_run_vectors.Div(j);
      return r * stride_vectors + (j - r * run_vectors);
    };
    auto add_vector = [&](const uint4& raw) {
      const E* e = reinterpret_cast<const E*>(&raw);
#pragma unroll
      for (int q = 0; q < kVec; ++q) m.Add(static_cast<double>(Dev<XT>::Widen(e[q])) - shift);
    };
    const int64_t bd = blockDim.x;
    int64_t j = vb + threadIdx.x;
    for (; j + 3 * bd < ve; j += 4 * bd) {
      uint4 raw[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) raw[u] = __ldg(xv + at(j + u * bd));
#pragma unroll
      for (int u = 0; u < 4; ++u) add_vector(raw[u]);
    }
    for (; j < ve; j += bd) add_vector(__ldg(xv + at(j)));
  } else if (run_len >= kVectorRun) {
    for (int64_t r = begin / run_len; r * run_len < end; ++r) {
      const int64_t lo = max(begin, r * run_len), hi = min(end, (r + 1) * run_len);
      ForEachLoadedChunk<XT>(x + base + r * stride + (lo - r * run_len), hi - lo, threadIdx.x,
                             blockDim.x, add);
    }
  } else {
    // Element j of the set is run j / run_len, position j % run_len; the thread steps by
    // blockDim.x without dividing per element.
    int64_t j = begin + threadIdx.x;
    int64_t run = j / run_len, pos = j % run_len;
    const int64_t step_run = blockDim.x / run_len, step_pos = blockDim.x % run_len;
    for (; j < end; j += blockDim.x) {
      m.Add(static_cast<double>(Dev<XT>::Widen(x[base + run * stride + pos])) - shift);
      run += step_run;
      pos += step_pos;
      if (pos >= run_len) {
        pos -= run_len;
        ++run;
      }
    }
  }
  BlockSumsTo(m, static_cast<double>(end > begin ? end - begin : 0), partials + blockIdx.x * 3);
}

// Channels-last (PlanChannelsLast: `width` channels a tile, V a thread): block (split,
// tile, sample) reads rows [split's range) of its row group (every row for BatchNorm, the
// sample's S for GroupNorm) and channels [tile * width, + width): thread t takes V
// channels at (t % lanes) * V of every (256 / lanes)-th row, lanes = the tile's channels /
// V. Each channel's deviation is from its set's first element; the threads of a channel
// are then added in row order, and for GroupNorm the channels of a group in channel order.
template <int XT, int V>
__global__ void __launch_bounds__(kThreads, 3)
    PartialStatsChannelsLast(ChannelArgs a, int64_t width, int splits, double* partials) {
  __shared__ double sh[2][kThreads * V];
  const int split = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * width;
  const int w = static_cast<int>(a.c - c0 < width ? a.c - c0 : width);
  const int lanes = w / V, rows_at_once = kThreads / lanes;
  const int t = threadIdx.x;
  const int lane = t % lanes, row0 = t / lanes;
  const bool gn = a.groups != 0;
  const int64_t cpg = gn ? a.c / a.groups : 1;
  const int64_t rows = gn ? a.s : a.n * a.s;
  const int64_t first_row = gn ? static_cast<int64_t>(blockIdx.z) * a.s : 0;
  const int64_t chunk = (rows + splits - 1) / splits;
  const int64_t begin = split * chunk, end = min(rows, begin + chunk);
  using E = typename Dev<XT>::Elem;
  const E* x = static_cast<const E*>(a.x);
  if (row0 < rows_at_once) {
    const int64_t c = c0 + lane * V;
    float shift[V];
    double s1[V], s2[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      // BatchNorm: the channel's first row; GroupNorm: the group's first channel of the
      // sample's first row (SetFirst).
      const int64_t set_first = gn ? (c + j) / cpg * cpg : c + j;
      shift[j] = Dev<XT>::Widen(x[first_row * a.c + set_first]);
      s1[j] = 0;
      s2[j] = 0;
    }
    auto add = [&](const float* v) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const double d = static_cast<double>(v[j]) - shift[j];
        s1[j] += d;
        s2[j] = fma(d, d, s2[j]);
      }
    };
    const int64_t at = first_row * a.c + c;
    constexpr int kU = V >= 8 ? 2 : 4;  // loads in flight a thread
    int64_t r = begin + row0;
    for (; r + (kU - 1) * rows_at_once < end; r += kU * rows_at_once) {
      float v[kU][V];
#pragma unroll
      for (int u = 0; u < kU; ++u) LoadK<XT, V>(x, at + (r + u * rows_at_once) * a.c, v[u]);
#pragma unroll
      for (int u = 0; u < kU; ++u) add(v[u]);
    }
    for (; r < end; r += rows_at_once) {
      float v[V];
      LoadK<XT, V>(x, at + r * a.c, v);
      add(v);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      sh[0][row0 * w + lane * V + j] = s1[j];
      sh[1][row0 * w + lane * V + j] = s2[j];
    }
  }
  __syncthreads();
  // Column cl's rows, in row order, into its first row (no other thread reads it).
  for (int cl = t; cl < w; cl += kThreads) {
    double t1 = 0, t2 = 0;
    for (int r = 0; r < rows_at_once; ++r) {
      t1 += sh[0][r * w + cl];
      t2 += sh[1][r * w + cl];
    }
    sh[0][cl] = t1;
    sh[1][cl] = t2;
  }
  __syncthreads();
  const double count = static_cast<double>(end > begin ? end - begin : 0);
  if (!gn) {
    for (int cl = t; cl < w; cl += kThreads) {
      double* out = partials + ((c0 + cl) * splits + split) * 3;
      out[0] = count;
      out[1] = sh[0][cl];
      out[2] = sh[1][cl];
    }
  } else {
    const int groups_here = static_cast<int>(w / cpg);
    for (int i = t; i < groups_here; i += kThreads) {
      double t1 = 0, t2 = 0;
      for (int64_t j = i * cpg; j < (i + 1) * cpg; ++j) {
        t1 += sh[0][j];
        t2 += sh[1][j];
      }
      const int64_t k = static_cast<int64_t>(blockIdx.z) * a.groups + c0 / cpg + i;
      double* out = partials + (k * splits + split) * 3;
      out[0] = count * static_cast<double>(cpg);
      out[1] = t1;
      out[2] = t2;
    }
  }
}

// A warp per set: each lane sums every 32nd split's partial sums, four splits' loads in
// flight, then the warp adds the lanes' (a thread per set, walking a channels-last
// BatchNorm's 264 splits one load after another, took 55 us on an H100: half the call).
// The set's mean and (biased) variance, and its channels' parameters. The loads that do
// not wait for the sums (the shift, the lane's first channel's weight and bias) go first.
__global__ void MergeStats(ChannelArgs a, int64_t sets, int splits, const double* partials,
                           double* mean, double* var, float4* params) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int64_t cpg = a.groups == 0 ? 1 : a.c / a.groups;
  for (int64_t k = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; k < sets;
       k += warps) {
    const double shift = LoadAny(a.x_dtype, a.x, SetFirst(a, k));
    const int64_t sample = a.groups == 0 ? 0 : k / a.groups;
    const int64_t c_first = a.groups == 0 ? k : (k % a.groups) * cpg;
    const bool has_channel = lane < cpg;
    const double w0 = has_channel ? WeightOf(a, c_first + lane) : 1.0;
    const float b0 = has_channel ? BiasOf(a, c_first + lane) : 0.0f;
    double n = 0, s1 = 0, s2 = 0;
#pragma unroll 4
    for (int i = lane; i < splits; i += 32) {
      const double* p = partials + (k * splits + i) * 3;
      n += p[0];
      s1 += p[1];
      s2 += p[2];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      n += __shfl_xor_sync(0xffffffffu, n, o);
      s1 += __shfl_xor_sync(0xffffffffu, s1, o);
      s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    }
    const double d1 = n > 0 ? s1 / n : 0.0;
    const double m = shift + d1;
    const double v = n > 0 ? fmax(s2 / n - d1 * d1, 0.0) : 0.0;
    if (lane == 0) {
      mean[k] = m;
      var[k] = v;
    }
    // Parameter index: the channel for BatchNorm, n * C + c for GroupNorm.
    const int64_t p_first = sample * a.c * (a.groups == 0 ? 0 : 1) + c_first;
    if (has_channel) params[p_first + lane] = ParamsOf(a, m, v, w0, b0);
    for (int64_t j = lane + 32; j < cpg; j += 32) {
      params[p_first + j] = ParamsOf(a, m, v, WeightOf(a, c_first + j), BiasOf(a, c_first + j));
    }
  }
}

template <int XT>
void LaunchPartials(const ChannelArgs& a, int splits, double* partials, cudaStream_t stream) {
  const ChannelsLastPlan plan = PlanChannelsLast(a);
  if (plan.vec != 0) {
    const dim3 grid(static_cast<unsigned>(splits),
                    static_cast<unsigned>((a.c + plan.width - 1) / plan.width),
                    static_cast<unsigned>(a.groups == 0 ? 1 : a.n));
    if (plan.vec == 1) {
      PartialStatsChannelsLast<XT, 1>
          <<<grid, kThreads, 0, stream>>>(a, plan.width, splits, partials);
    } else {
      PartialStatsChannelsLast<XT, 16 / sizeof(typename Dev<XT>::Elem)>
          <<<grid, kThreads, 0, stream>>>(a, plan.width, splits, partials);
    }
  } else {
    const int64_t sets = a.groups == 0 ? a.c : a.n * a.groups;
    // PartialStats's runs: a group's channels a row where channels-last, else a plane (a
    // sample's, for BatchNorm) or a group's planes.
    const int64_t cpg = a.groups == 0 ? 1 : a.c / a.groups;
    const int64_t run_len = a.channels_last ? cpg : cpg * a.s;
    const int64_t run_vectors = std::max<int64_t>(1, run_len / Dev<XT>::kVec);
    const FastDiv by_run_vectors(run_vectors, a.n * a.c * a.s);
    PartialStats<XT><<<static_cast<unsigned>(sets * splits), kThreads, 0, stream>>>(
        a, splits, by_run_vectors, partials);
  }
}

}  // namespace

cudaError_t LaunchChannelStats(const ChannelArgs& a, int splits, double* partials, double* mean,
                               double* var, float4* params, cudaStream_t stream) {
  const int64_t sets = a.groups == 0 ? a.c : a.n * a.groups;
  if (sets == 0) return cudaSuccess;
  if (a.x_dtype == kDevF32) {
    LaunchPartials<kDevF32>(a, splits, partials, stream);
  } else if (a.x_dtype == kDevF16) {
    LaunchPartials<kDevF16>(a, splits, partials, stream);
  } else {
    LaunchPartials<kDevBF16>(a, splits, partials, stream);
  }
  MergeStats<<<GridFor(sets * 32), kThreads, 0, stream>>>(a, sets, splits, partials, mean, var,
                                                          params);
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
