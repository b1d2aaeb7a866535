// CpuBackend::BatchNorm and GroupNorm (InstanceNorm is GroupNorm with G == C): statistics
// and outputs through the SIMD primitives of channel_norm_simd.h, spread over the pool.
//
// Work units are chosen so that x is read from memory once for statistics and the output
// pass finds it in cache where it can: channels-first BatchNorm works channel by channel
// (N runs of S), GroupNorm group by group (contiguous), channels-last GroupNorm sample by
// sample. Channels-last BatchNorm reduces over the whole tensor: blocks of rows are reduced
// in cache (one pass per block where exact) and merged with Chan's formula, then the output
// pass reads x again. Statistics are fp32 sums gathered in double; BatchNorm's, which are
// outputs, are redone in double where its mean needs more (cpu::Fp32MeanSuffices).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/channel_norm_simd.h"
#include "kernels/cpu/stats.h"
#include "kernels/cpu/thread_pool.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels {
namespace {

const void* At(const ConstTensor& t, int64_t i) {
  return static_cast<const char*>(t.data) + i * ElementSize(t.dtype);
}
void* At(const MutTensor& t, int64_t i) {
  return static_cast<char*>(t.data) + i * ElementSize(t.dtype);
}

// Per-channel affine of normalized values: scale = rstd * weight, shift = bias.
void Coefficients(const ConstTensor& weight, const ConstTensor& bias, int64_t c, double rstd,
                  double* scale, double* shift) {
  *scale = weight.present() ? rstd * weight.at(c) : rstd;
  *shift = bias.present() ? bias.at(c) : 0.0;
}

// Per-column (count, mean, M2) of rows [begin, end) of a [rows, C] matrix, reduced in
// blocks that fit in L2 (one pass each where exact: cpu::ColumnMoments) and merged with
// Chan's formula.
std::vector<cpu::ChanMoments> ColumnMoments(const ConstTensor& x, int64_t c_dim, int64_t begin,
                                            int64_t end, bool f64) {
  std::vector<cpu::ChanMoments> acc(c_dim);
  const int64_t block = std::max<int64_t>(1, (256 << 10) / (c_dim * ElementSize(x.dtype)));
  std::vector<double> mean(c_dim), m2(c_dim);
  for (int64_t r = begin; r < end; r += block) {
    const int64_t rows = std::min(block, end - r);
    cpu::ColumnMoments(x.dtype, At(x, r * c_dim), rows, c_dim, f64, mean.data(), m2.data());
    for (int64_t c = 0; c < c_dim; ++c) acc[c].Merge(static_cast<double>(rows), mean[c], m2[c]);
  }
  return acc;
}

}  // namespace

absl::Status CpuBackend::BatchNorm(const BatchNormArgs& a) { return BatchNorm(a, threads()); }

absl::Status CpuBackend::BatchNorm(const BatchNormArgs& a, int max_threads) {
  const int64_t total = a.n * a.c * a.s;
  if (total == 0) return absl::OkStatus();
  // Each pass's dispatch counts the whole op's bytes: only whether the job is long matters.
  const int64_t job_bytes = JobBytes(total, a.x.dtype, a.y.dtype);
  max_threads = ThreadsFor(job_bytes, max_threads);
  const double count = static_cast<double>(a.n * a.s);
  const bool cf = a.layout == Layout::kChannelsFirst;
  const bool stream = total * ElementSize(a.y.dtype) > options_.stream_bytes;
  std::vector<double> mean(a.c), scale(a.c), shift(a.c);
  // Per channel: statistics (training) or running stats, then the coefficients.
  auto finish_channel = [&](int64_t c, double m, double var) {
    if (a.training) {
      if (a.batch_mean.present()) a.batch_mean.set(c, static_cast<float>(m));
      if (a.batch_var.present()) a.batch_var.set(c, static_cast<float>(var));
      if (a.running_mean_out.present()) {
        a.running_mean_out.set(
            c, static_cast<float>((1 - a.momentum) * a.running_mean.at(c) + a.momentum * m));
        a.running_var_out.set(c, static_cast<float>((1 - a.momentum) * a.running_var.at(c) +
                                                    a.momentum * var * count / (count - 1)));
      }
    }
    mean[c] = m;
    Coefficients(a.weight, a.bias, c, 1.0 / std::sqrt(var + a.eps), &scale[c], &shift[c]);
  };
  if (!a.training) {
    for (int64_t c = 0; c < a.c; ++c) finish_channel(c, a.running_mean.at(c), a.running_var.at(c));
  }
  cpu::ScopedFlushDenormals flush;
  if (cf && !a.training) {
    // Inference reads each element once: the [N * C] runs go in memory order, each thread a
    // contiguous range of them, as a copy would. Channel by channel, a channel's N runs lay
    // C * S elements apart (0.8 MB in the benchmark's 32x64x56x56), and each began a new
    // stream for the prefetchers to find (f32 one thread 40 -> 60 GB/s).
    // Non-temporal stores past stream_bytes of output, as the other ops. This pass once
    // streamed only where x and y together outgrew 32 MiB, a last-level cache, and plain
    // stores ran faster below that (BENCHMARKS.md, eighteenth session); since the streamed
    // f16 and bf16 stores go out 32 bytes at a time (StreamAs2), streaming is the faster:
    // f16/bf16 32x64x56x56 (x and y 12.8 MB each) 0.50/0.47 -> 0.69/0.59 of memcpy on one
    // thread (BENCHMARKS.md, fifty-third session).
    pool_->ParallelFor(a.n * a.c, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t c = r % a.c;
        cpu::ApplyRun(a.x.dtype, At(a.x, r * a.s), a.s, mean[c], scale[c], shift[c], a.y.dtype,
                      At(a.y, r * a.s), stream, nullptr);
      }
      if (stream) cpu::FenceStreams();
    });
    return absl::OkStatus();
  }
  if (cf) {
    // Channel by channel: its N runs are reduced, then normalized while still in cache. In
    // training, runs of at most kRunSumsMax elements have their fp32 statistics summed while
    // the run before them (the previous channel's) is written (RunSumsCursor: the same bits as
    // RunMoments). One thread, 32x64x56x56, three alternating rounds (BENCHMARKS.md, issue
    // 16, fifty-seventh session), of memcpy: f16/bf16 0.65/0.69 -> 0.84/0.85, f32 0.83 -> 0.88.
    const bool fuse = a.training && a.s <= cpu::kRunSumsMax;
    pool_->ParallelFor(a.c, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
      cpu::RunSumsCursor sums;
      std::vector<double> run_mean(fuse ? a.n : 0), run_m2(fuse ? a.n : 0);
      for (int64_t c = begin; c < end; ++c) {
        if (a.training) {
          auto moments = [&](bool f64) {
            cpu::ChanMoments acc;
            for (int64_t n = 0; n < a.n; ++n) {
              double m, m2;
              if (!f64 && fuse && c > begin) {
                m = run_mean[n];
                m2 = run_m2[n];
              } else {
                cpu::RunMoments(a.x.dtype, At(a.x, (n * a.c + c) * a.s), a.s, f64, &m, &m2);
              }
              acc.Merge(static_cast<double>(a.s), m, m2);
            }
            return acc;
          };
          cpu::ChanMoments acc = moments(/*f64=*/false);
          if (!cpu::Fp32MeanSuffices(acc.mean(), acc.m2 / count)) acc = moments(/*f64=*/true);
          finish_channel(c, acc.mean(), acc.m2 / count);
        }
        // The next channel's runs (read by its statistics) come into the cache meanwhile, or
        // are summed.
        const bool next = a.training && c + 1 < end;
        for (int64_t n = 0; n < a.n; ++n) {
          const int64_t off = (n * a.c + c) * a.s;
          if (next && fuse) cpu::BeginRunSums(a.x.dtype, At(a.x, off + a.s), a.s, &sums);
          cpu::ApplyRun(a.x.dtype, At(a.x, off), a.s, mean[c], scale[c], shift[c], a.y.dtype,
                        At(a.y, off), stream, next && !fuse ? At(a.x, off + a.s) : nullptr,
                        next && fuse ? &sums : nullptr);
          if (next && fuse) cpu::FinishRunSums(&sums, &run_mean[n], &run_m2[n]);
        }
      }
      if (stream) cpu::FenceStreams();
    });
    return absl::OkStatus();
  }
  // Channels last: x is a [N * S, C] matrix.
  const int64_t rows = a.n * a.s;
  if (a.training) {
    const int parts = static_cast<int>(std::min<int64_t>(std::max(1, max_threads), rows));
    std::vector<std::vector<cpu::ChanMoments>> partial(parts);
    std::vector<cpu::ChanMoments> acc(a.c);
    // fp32 sums first; if any channel's mean needs more (Fp32MeanSuffices), all in double:
    // the tensor is read in rows, so one channel costs as much as all.
    for (bool f64 : {false, true}) {
      pool_->ParallelFor(parts, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          partial[p] = ColumnMoments(a.x, a.c, rows * p / parts, rows * (p + 1) / parts, f64);
        }
      });
      bool suffice = true;
      for (int64_t c = 0; c < a.c; ++c) {
        acc[c] = cpu::ChanMoments();
        for (const auto& part : partial) acc[c].Merge(part[c].count, part[c].mean(), part[c].m2);
        suffice = suffice && cpu::Fp32MeanSuffices(acc[c].mean(), acc[c].m2 / count);
      }
      if (suffice) break;
    }
    for (int64_t c = 0; c < a.c; ++c) finish_channel(c, acc[c].mean(), acc[c].m2 / count);
  }
  pool_->ParallelFor(rows, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
    cpu::ApplyColumns(a.x.dtype, At(a.x, begin * a.c), end - begin, a.c, mean.data(), scale.data(),
                      shift.data(), a.y.dtype, At(a.y, begin * a.c), stream);
    if (stream) cpu::FenceStreams();
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::GroupNorm(const GroupNormArgs& a) { return GroupNorm(a, threads()); }

absl::Status CpuBackend::GroupNorm(const GroupNormArgs& a, int max_threads) {
  const int64_t total = a.n * a.c * a.s;
  if (total == 0) return absl::OkStatus();
  // Each pass's dispatch counts the whole op's bytes: only whether the job is long matters.
  const int64_t job_bytes = JobBytes(total, a.x.dtype, a.y.dtype);
  max_threads = ThreadsFor(job_bytes, max_threads);
  const int64_t cpg = a.c / a.groups;
  const double count = static_cast<double>(cpg * a.s);
  // Outputs beyond the cache go out non-temporal, as the row ops' do.
  const bool stream = total * ElementSize(a.y.dtype) > options_.stream_bytes;
  cpu::ScopedFlushDenormals flush;
  if (a.layout == Layout::kChannelsFirst) {
    // Instance by instance: a group is cpg * S contiguous elements, and the next group
    // follows it, so while one group is normalized from cache the next is fetched for its
    // statistics (as channels-first BatchNorm's training does channel by channel).
    // Groups of at most kRunSumsMax elements have their statistics summed while the group
    // before them is written (RunSumsCursor: the same bits as RunMoments). One thread,
    // 32x64x56x56, three alternating rounds (BENCHMARKS.md, issue 16, fifty-seventh session),
    // of memcpy: GroupNorm f16/bf16 0.69/0.75 -> 0.91/0.93, InstanceNorm 0.72/0.76 ->
    // 0.91/0.91, f32 0.88-0.95 -> 0.95-0.96 (BatchNorm training below). Fetching the head of
    // the group after next a group early (BeginRunSums waits on its first vectors) cost
    // 0.04-0.06; fetching the summed group a block ahead of the sums moved nothing.
    const int64_t len = cpg * a.s;
    const bool fuse = len <= cpu::kRunSumsMax;
    pool_->ParallelFor(a.n * a.groups, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
      cpu::RunSumsCursor sums;
      for (int64_t ng = begin; ng < end; ++ng) {
        const int64_t n = ng / a.groups, g = ng % a.groups;
        const int64_t off = (n * a.c + g * cpg) * a.s;
        double mean, m2;
        if (fuse && ng > begin) {
          cpu::FinishRunSums(&sums, &mean, &m2);
        } else {
          cpu::RunMoments(a.x.dtype, At(a.x, off), len, /*f64=*/false, &mean, &m2);
        }
        const double rstd = 1.0 / std::sqrt(m2 / count + a.eps);
        const bool next = ng + 1 < end;
        if (fuse && next) cpu::BeginRunSums(a.x.dtype, At(a.x, off + len), len, &sums);
        for (int64_t k = 0; k < cpg; ++k) {
          const int64_t c = g * cpg + k, run = off + k * a.s;
          double scale, shift;
          Coefficients(a.weight, a.bias, c, rstd, &scale, &shift);
          cpu::ApplyRun(a.x.dtype, At(a.x, run), a.s, mean, scale, shift, a.y.dtype, At(a.y, run),
                        stream, next && !fuse ? At(a.x, run + len) : nullptr,
                        next && fuse ? &sums : nullptr);
        }
      }
      if (stream) cpu::FenceStreams();
    });
    return absl::OkStatus();
  }
  // Channels last, sample by sample: a sample is an [S, C] matrix whose columns fall into
  // groups of cpg; its column statistics (one pass where exact) merge into the groups',
  // and it is normalized while in cache. Unlike channels-first, the next sample read during
  // the output pass made it slower (BENCHMARKS.md, issue 16, fifty-seventh session): its
  // column sums beside the output, -0.01 to -0.07 of memcpy; the sample fetched
  // into L2 there, -0.09 to -0.17.
  pool_->ParallelFor(a.n, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
    std::vector<double> cmean(a.c), cm2(a.c), mean(a.c), scale(a.c), shift(a.c);
    for (int64_t n = begin; n < end; ++n) {
      const int64_t off = n * a.s * a.c;
      cpu::ColumnMoments(a.x.dtype, At(a.x, off), a.s, a.c, /*f64=*/false, cmean.data(),
                         cm2.data());
      for (int64_t g = 0; g < a.groups; ++g) {
        cpu::ChanMoments acc;
        for (int64_t k = 0; k < cpg; ++k) {
          acc.Merge(static_cast<double>(a.s), cmean[g * cpg + k], cm2[g * cpg + k]);
        }
        const double rstd = 1.0 / std::sqrt(acc.m2 / count + a.eps);
        for (int64_t k = 0; k < cpg; ++k) {
          const int64_t c = g * cpg + k;
          mean[c] = acc.mean();
          Coefficients(a.weight, a.bias, c, rstd, &scale[c], &shift[c]);
        }
      }
      cpu::ApplyColumns(a.x.dtype, At(a.x, off), a.s, a.c, mean.data(), scale.data(), shift.data(),
                        a.y.dtype, At(a.y, off), stream);
    }
    if (stream) cpu::FenceStreams();
  });
  return absl::OkStatus();
}

}  // namespace normd::kernels
