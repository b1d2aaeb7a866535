// CPU LayerNorm / RMSNorm / L2Norm with residual fusion: each row is loaded once into an
// fp32 buffer (residual added on the way), its statistics taken there (stats.h), and the
// output written in one pass. The epilogue (centre, scale, weight, bias, residual) runs in
// double and rounds once: with fp32 an output that a bias or residual nearly cancels would
// miss the one-ulp F16/BF16 rule.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/stats.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels {
namespace {

double Reciprocal(EpsPlacement placement, double moment, double eps) {
  return placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(moment + eps)
                                                : 1.0 / (std::sqrt(moment) + eps);
}

}  // namespace

absl::Status CpuBackend::RowNorm(const RowNormArgs& a) {
  const int64_t cols = a.cols;
  // (offset + weight) in fp32, as SEMANTICS.md defines it, and bias, once per call.
  std::vector<float> weight, bias;
  if (a.weight.present()) {
    weight.resize(cols);
    const float offset = a.kind == RowNormKind::kRms ? static_cast<float>(a.weight_offset) : 0;
    for (int64_t i = 0; i < cols; ++i) weight[i] = offset + a.weight.at(i);
  }
  if (a.bias.present()) {
    bias.resize(cols);
    for (int64_t i = 0; i < cols; ++i) bias[i] = a.bias.at(i);
  }
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  const bool norm_then_add = a.residual == ResidualPlacement::kNormThenAdd;
  const bool cast_first = a.kind == RowNormKind::kRms && a.cast_before_weight;
  // alpha is an fp32 scalar: h = alpha * skip + x is formed with one fp32 rounding (fma).
  const auto alpha = static_cast<float>(a.alpha);
  const int64_t stat_cols =
      a.kind == RowNormKind::kRms ? PartialCount(a.partial_fraction, cols) : cols;

  thread_local std::vector<float> row;
  row.resize(cols);
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t base = r * cols;
    for (int64_t i = 0; i < cols; ++i) {
      float v = a.x.at(base + i);
      if (add_then_norm) v = std::fma(alpha, a.skip.at(base + i), v);
      row[i] = v;
    }
    if (a.h.present()) {
      for (int64_t i = 0; i < cols; ++i) a.h.set(base + i, row[i]);
    }
    double mean = 0, scale = 1;
    switch (a.kind) {
      case RowNormKind::kLayer: {
        const cpu::Moments m = cpu::ComputeMoments(row.data(), cols);
        mean = m.mean;
        scale = Reciprocal(a.eps_placement, static_cast<double>(m.m2) / cols, a.eps);
        break;
      }
      case RowNormKind::kRms: {
        const double ms = cpu::SumOfSquares(row.data(), stat_cols) / static_cast<double>(stat_cols);
        scale = Reciprocal(a.eps_placement, ms, a.eps);
        break;
      }
      case RowNormKind::kL2: {
        const double norm = std::sqrt(cpu::SumOfSquares(row.data(), cols));
        scale = 1.0 / std::max(norm, a.eps);
        break;
      }
    }
    for (int64_t i = 0; i < cols; ++i) {
      double v = (static_cast<double>(row[i]) - mean) * scale;
      if (cast_first) v = RoundTo(a.x.dtype, static_cast<float>(v));
      if (!weight.empty()) v *= weight[i];
      if (!bias.empty()) v += bias[i];
      if (norm_then_add) v += static_cast<double>(alpha) * a.skip.at(base + i);
      a.y.set(base + i, static_cast<float>(v));
    }
  }
  return absl::OkStatus();
}

}  // namespace normd::kernels
