// float64 reference for LayerNorm, RMSNorm and L2Norm with residual fusion.
#include <algorithm>
#include <cmath>
#include <limits>

#include "normd/kernels/reference.h"

namespace normd::kernels::reference {

namespace {

// Row r of x (h = alpha * skip + x for ADD_THEN_NORM), in double.
void ReadRow(const RowNormArgs& a, int64_t r, std::vector<double>* row) {
  row->resize(a.cols);
  const int64_t base = r * a.cols;
  for (int64_t i = 0; i < a.cols; ++i) {
    double v = a.x.at(base + i);
    if (a.residual == ResidualPlacement::kAddThenNorm) {
      // docs/semantics.md: h is an fp32 quantity (alpha an fp32 scalar, one rounding); the
      // statistics are taken on it before it is rounded to the output dtype.
      const double alpha = static_cast<float>(a.alpha);
      v = static_cast<float>(alpha * a.skip.at(base + i) + v);
    }
    (*row)[i] = v;
  }
}

// The neighbour of `rounded` (a value of t) on n's side, when n is within 2^-20 relative of
// the rounding boundary between them; NaN otherwise.
double OtherRounding(DType t, double n, double rounded) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  if (t == DType::kF32 || !std::isfinite(n) || n == rounded) return none;
  const uint16_t b = HalfBits(t, static_cast<float>(rounded));
  for (int delta : {-1, 1}) {
    const double cand = HalfValue(t, static_cast<uint16_t>(b + delta));
    if (!std::isfinite(cand) || (cand - rounded) * (n - rounded) <= 0) continue;
    const double boundary = (cand + rounded) / 2;
    if (std::fabs(n - boundary) <= 0x1p-20 * std::fabs(n)) return cand;
  }
  return none;
}

RowStats Statistics(const RowNormArgs& a, const std::vector<double>& row) {
  RowStats s;
  const auto d = static_cast<double>(a.cols);
  const auto inverse = [&](double v) {
    return a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(v + a.eps)
                                                        : 1.0 / (std::sqrt(v) + a.eps);
  };
  switch (a.kind) {
    case RowNormKind::kLayer: {
      for (double v : row) s.mean += v;
      s.mean /= d;
      double m2 = 0;
      for (double v : row) m2 += (v - s.mean) * (v - s.mean);
      const double var = m2 / d;
      s.sigma = std::sqrt(var);
      s.inverse_scale = inverse(var);
      break;
    }
    case RowNormKind::kRms: {
      const int64_t m = PartialCount(a.partial_fraction, a.cols);
      double ss = 0;
      for (int64_t i = 0; i < m; ++i) ss += row[i] * row[i];
      s.inverse_scale = inverse(ss / static_cast<double>(m));
      break;
    }
    case RowNormKind::kL2: {
      double ss = 0;
      for (double v : row) ss += v * v;
      s.inverse_scale = 1.0 / std::max(std::sqrt(ss), a.eps);
      break;
    }
  }
  return s;
}

}  // namespace

RowStats RowStatistics(const RowNormArgs& a, int64_t r) {
  std::vector<double> row;
  ReadRow(a, r, &row);
  return Statistics(a, row);
}

RowNormResult RowNorm(const RowNormArgs& a) {
  RowNormResult out;
  const int64_t total = a.rows * a.cols;
  out.y.resize(total);
  out.magnitude.resize(total);
  const bool cast = a.kind == RowNormKind::kRms && a.cast_before_weight && a.x.dtype != DType::kF32;
  if (cast) out.y_alt.resize(total);
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  if (add_then_norm) out.h.resize(total);
  std::vector<double> row;
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t base = r * a.cols;
    ReadRow(a, r, &row);
    if (add_then_norm) std::copy(row.begin(), row.end(), out.h.begin() + base);
    const RowStats st = Statistics(a, row);
    const double mean = st.mean, scale = st.inverse_scale;
    for (int64_t i = 0; i < a.cols; ++i) {
      double n = (row[i] - mean) * scale, alt = std::numeric_limits<double>::quiet_NaN();
      if (a.kind == RowNormKind::kRms && a.cast_before_weight) {
        const double exact = n;
        n = RoundTo(a.x.dtype, static_cast<float>(n));
        if (cast) alt = OtherRounding(a.x.dtype, exact, n);
      }
      double w = 1;
      if (a.weight.present()) {
        w = a.weight.at(i);
        if (a.kind == RowNormKind::kRms) w += a.weight_offset;
      }
      // Terms after normalizing: n * w, the bias, alpha * skip.
      double add = 0, magnitude = std::fabs(n * w);
      if (a.bias.present()) {
        add += a.bias.at(i);
        magnitude += std::fabs(a.bias.at(i));
      }
      if (a.residual == ResidualPlacement::kNormThenAdd) {
        const double term = static_cast<double>(static_cast<float>(a.alpha)) * a.skip.at(base + i);
        add += term;
        magnitude += std::fabs(term);
      }
      out.y[base + i] = n * w + add;
      out.magnitude[base + i] = magnitude;
      if (cast) out.y_alt[base + i] = alt * w + add;
    }
  }
  return out;
}

}  // namespace normd::kernels::reference
