// float64 reference for LayerNorm, RMSNorm and L2Norm with residual fusion.
#include <algorithm>
#include <cmath>

#include "normd/kernels/reference.h"

namespace normd::kernels::reference {

RowNormResult RowNorm(const RowNormArgs& a) {
  RowNormResult out;
  const int64_t total = a.rows * a.cols;
  out.y.resize(total);
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  if (add_then_norm) out.h.resize(total);
  std::vector<double> row(a.cols);
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t base = r * a.cols;
    for (int64_t i = 0; i < a.cols; ++i) {
      double v = a.x.at(base + i);
      if (add_then_norm) {
        // docs/semantics.md: h is an fp32 quantity (alpha an fp32 scalar, one rounding); the
        // statistics are taken on it before it is rounded to the output dtype.
        const double alpha = static_cast<float>(a.alpha);
        v = static_cast<float>(alpha * a.skip.at(base + i) + v);
        out.h[base + i] = v;
      }
      row[i] = v;
    }
    const auto d = static_cast<double>(a.cols);
    double mean = 0, scale = 1;
    switch (a.kind) {
      case RowNormKind::kLayer: {
        for (double v : row) mean += v;
        mean /= d;
        double m2 = 0;
        for (double v : row) m2 += (v - mean) * (v - mean);
        const double var = m2 / d;
        scale = a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(var + a.eps)
                                                             : 1.0 / (std::sqrt(var) + a.eps);
        break;
      }
      case RowNormKind::kRms: {
        const int64_t m = PartialCount(a.partial_fraction, a.cols);
        double ss = 0;
        for (int64_t i = 0; i < m; ++i) ss += row[i] * row[i];
        const double ms = ss / static_cast<double>(m);
        scale = a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(ms + a.eps)
                                                             : 1.0 / (std::sqrt(ms) + a.eps);
        break;
      }
      case RowNormKind::kL2: {
        double ss = 0;
        for (double v : row) ss += v * v;
        scale = 1.0 / std::max(std::sqrt(ss), a.eps);
        break;
      }
    }
    for (int64_t i = 0; i < a.cols; ++i) {
      double n = (row[i] - mean) * scale;
      if (a.kind == RowNormKind::kRms && a.cast_before_weight) {
        n = RoundTo(a.x.dtype, static_cast<float>(n));
      }
      if (a.weight.present()) {
        double w = a.weight.at(i);
        if (a.kind == RowNormKind::kRms) w += a.weight_offset;
        n *= w;
      }
      if (a.bias.present()) n += a.bias.at(i);
      if (a.residual == ResidualPlacement::kNormThenAdd) {
        n += static_cast<double>(static_cast<float>(a.alpha)) * a.skip.at(base + i);
      }
      out.y[base + i] = n;
    }
  }
  return out;
}

}  // namespace normd::kernels::reference
