// CPU BatchNorm and GroupNorm (InstanceNorm is GroupNorm with G == C). Statistics are
// gathered in fp32 buffers of kSegment elements, each reduced with stats.h's two-pass
// moments and merged across segments with Chan's formula; the output pass applies a
// per-(sample, channel) centre and scale.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/stats.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels {
namespace {

constexpr int64_t kSegment = 4096;

// The elements of one statistics group: `count` runs of `len` contiguous elements, run r
// starting at start + r * stride.
struct Runs {
  int64_t start, len, stride, count;
};

cpu::ChanMoments MomentsOf(const ConstTensor& x, const Runs& runs) {
  thread_local std::vector<float> buf(kSegment);
  cpu::ChanMoments acc;
  int64_t filled = 0;
  auto flush = [&] {
    if (filled == 0) return;
    const cpu::Moments m = cpu::ComputeMoments(buf.data(), filled);
    acc.Merge(static_cast<double>(filled), m.mean, m.m2);
    filled = 0;
  };
  for (int64_t r = 0; r < runs.count; ++r) {
    const int64_t off = runs.start + r * runs.stride;
    for (int64_t j = 0; j < runs.len;) {
      const int64_t take = std::min(runs.len - j, kSegment - filled);
      for (int64_t k = 0; k < take; ++k) buf[filled + k] = x.at(off + j + k);
      filled += take;
      j += take;
      if (filled == kSegment) flush();
    }
  }
  flush();
  return acc;
}

// y = (x - mean) * scale + shift per (sample, channel), evaluated in double and rounded
// once, so an output that the bias nearly cancels still meets the one-ulp F16/BF16 rule.
struct ChannelCoefficients {
  std::vector<double> mean, scale, shift;
  explicit ChannelCoefficients(int64_t size) : mean(size), scale(size), shift(size) {}

  void Set(int64_t i, double m, double rstd, const ConstTensor& weight, const ConstTensor& bias,
           int64_t c) {
    mean[i] = m;
    scale[i] = weight.present() ? rstd * weight.at(c) : rstd;
    shift[i] = bias.present() ? bias.at(c) : 0.0;
  }
  float Apply(int64_t i, float x) const {
    return static_cast<float>((x - mean[i]) * scale[i] + shift[i]);
  }
};

// Applies the coefficients; coefficient index is n * n_stride + c (n_stride 0: per channel).
void Apply(const ConstTensor& x, const MutTensor& y, int64_t n_dim, int64_t c_dim, int64_t s_dim,
           Layout layout, const ChannelCoefficients& k, int64_t n_stride) {
  for (int64_t n = 0; n < n_dim; ++n) {
    const int64_t kb = n * n_stride;
    if (layout == Layout::kChannelsFirst) {
      for (int64_t c = 0; c < c_dim; ++c) {
        const int64_t base = (n * c_dim + c) * s_dim;
        for (int64_t s = 0; s < s_dim; ++s) y.set(base + s, k.Apply(kb + c, x.at(base + s)));
      }
    } else {
      for (int64_t s = 0; s < s_dim; ++s) {
        const int64_t base = (n * s_dim + s) * c_dim;
        for (int64_t c = 0; c < c_dim; ++c) y.set(base + c, k.Apply(kb + c, x.at(base + c)));
      }
    }
  }
}

}  // namespace

absl::Status CpuBackend::BatchNorm(const BatchNormArgs& a) { return BatchNorm(a, 1); }

absl::Status CpuBackend::BatchNorm(const BatchNormArgs& a, int max_threads) {
  (void)max_threads;
  ChannelCoefficients k(a.c);
  const double count = static_cast<double>(a.n * a.s);
  for (int64_t c = 0; c < a.c; ++c) {
    double mean, var;
    if (a.training) {
      const Runs runs = a.layout == Layout::kChannelsFirst ? Runs{c * a.s, a.s, a.c * a.s, a.n}
                                                           : Runs{c, 1, a.c, a.n * a.s};
      const cpu::ChanMoments m = MomentsOf(a.x, runs);
      mean = m.mean();
      var = m.m2 / count;
      if (a.batch_mean.present()) a.batch_mean.set(c, static_cast<float>(mean));
      if (a.batch_var.present()) a.batch_var.set(c, static_cast<float>(var));
      if (a.running_mean_out.present()) {
        const double rm = (1 - a.momentum) * a.running_mean.at(c) + a.momentum * mean;
        const double rv =
            (1 - a.momentum) * a.running_var.at(c) + a.momentum * var * count / (count - 1);
        a.running_mean_out.set(c, static_cast<float>(rm));
        a.running_var_out.set(c, static_cast<float>(rv));
      }
    } else {
      mean = a.running_mean.at(c);
      var = a.running_var.at(c);
    }
    k.Set(c, mean, 1.0 / std::sqrt(var + a.eps), a.weight, a.bias, c);
  }
  Apply(a.x, a.y, a.n, a.c, a.s, a.layout, k, 0);
  return absl::OkStatus();
}

absl::Status CpuBackend::GroupNorm(const GroupNormArgs& a) { return GroupNorm(a, 1); }

absl::Status CpuBackend::GroupNorm(const GroupNormArgs& a, int max_threads) {
  (void)max_threads;
  const int64_t cpg = a.c / a.groups;
  const double count = static_cast<double>(cpg * a.s);
  ChannelCoefficients k(a.n * a.c);
  for (int64_t n = 0; n < a.n; ++n) {
    for (int64_t g = 0; g < a.groups; ++g) {
      const Runs runs = a.layout == Layout::kChannelsFirst
                            ? Runs{(n * a.c + g * cpg) * a.s, cpg * a.s, 0, 1}
                            : Runs{n * a.s * a.c + g * cpg, cpg, a.c, a.s};
      const cpu::ChanMoments m = MomentsOf(a.x, runs);
      const double rstd = 1.0 / std::sqrt(m.m2 / count + a.eps);
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c) {
        k.Set(n * a.c + c, m.mean(), rstd, a.weight, a.bias, c);
      }
    }
  }
  Apply(a.x, a.y, a.n, a.c, a.s, a.layout, k, a.c);
  return absl::OkStatus();
}

}  // namespace normd::kernels
