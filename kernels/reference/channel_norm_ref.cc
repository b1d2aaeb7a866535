// float64 reference for BatchNorm, GroupNorm and InstanceNorm (GroupNorm with G == C).
#include <cmath>

#include "normd/kernels/reference.h"

namespace normd::kernels::reference {
namespace {

// Flat index of element (n, c, s) in either layout.
int64_t Index(Layout layout, int64_t c_dim, int64_t s_dim, int64_t n, int64_t c, int64_t s) {
  return layout == Layout::kChannelsFirst ? (n * c_dim + c) * s_dim + s
                                          : (n * s_dim + s) * c_dim + c;
}

// y = v * w + b, and its magnitude |v * w| + |b|.
double Affine(const ConstTensor& weight, const ConstTensor& bias, int64_t c, double v,
              double* magnitude) {
  if (weight.present()) v *= weight.at(c);
  *magnitude = std::fabs(v);
  if (bias.present()) {
    v += bias.at(c);
    *magnitude += std::fabs(bias.at(c));
  }
  return v;
}

}  // namespace

BatchNormResult BatchNorm(const BatchNormArgs& a) {
  BatchNormResult out;
  out.y.resize(a.n * a.c * a.s);
  out.magnitude.resize(a.n * a.c * a.s);
  const double count = static_cast<double>(a.n * a.s);
  for (int64_t c = 0; c < a.c; ++c) {
    double mean, var;
    if (a.training) {
      double sum = 0;
      for (int64_t n = 0; n < a.n; ++n)
        for (int64_t s = 0; s < a.s; ++s) sum += a.x.at(Index(a.layout, a.c, a.s, n, c, s));
      mean = sum / count;
      double m2 = 0;
      for (int64_t n = 0; n < a.n; ++n)
        for (int64_t s = 0; s < a.s; ++s) {
          const double d = a.x.at(Index(a.layout, a.c, a.s, n, c, s)) - mean;
          m2 += d * d;
        }
      var = m2 / count;
      out.mean.push_back(mean);
      out.var.push_back(var);
      if (a.running_mean.present()) {
        out.running_mean.push_back((1 - a.momentum) * a.running_mean.at(c) + a.momentum * mean);
        out.running_var.push_back((1 - a.momentum) * a.running_var.at(c) +
                                  a.momentum * var * count / (count - 1));
      }
    } else {
      mean = a.running_mean.at(c);
      var = a.running_var.at(c);
    }
    const double rstd = 1.0 / std::sqrt(var + a.eps);
    for (int64_t n = 0; n < a.n; ++n)
      for (int64_t s = 0; s < a.s; ++s) {
        const int64_t i = Index(a.layout, a.c, a.s, n, c, s);
        out.y[i] = Affine(a.weight, a.bias, c, (a.x.at(i) - mean) * rstd, &out.magnitude[i]);
      }
  }
  return out;
}

GroupNormResult GroupNorm(const GroupNormArgs& a) {
  GroupNormResult out;
  out.y.resize(a.n * a.c * a.s);
  out.magnitude.resize(a.n * a.c * a.s);
  const int64_t cpg = a.c / a.groups;
  const double count = static_cast<double>(cpg * a.s);
  for (int64_t n = 0; n < a.n; ++n) {
    for (int64_t g = 0; g < a.groups; ++g) {
      double sum = 0;
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
        for (int64_t s = 0; s < a.s; ++s) sum += a.x.at(Index(a.layout, a.c, a.s, n, c, s));
      const double mean = sum / count;
      double m2 = 0;
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
        for (int64_t s = 0; s < a.s; ++s) {
          const double d = a.x.at(Index(a.layout, a.c, a.s, n, c, s)) - mean;
          m2 += d * d;
        }
      const double rstd = 1.0 / std::sqrt(m2 / count + a.eps);
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
        for (int64_t s = 0; s < a.s; ++s) {
          const int64_t i = Index(a.layout, a.c, a.s, n, c, s);
          out.y[i] = Affine(a.weight, a.bias, c, (a.x.at(i) - mean) * rstd, &out.magnitude[i]);
        }
    }
  }
  return out;
}

}  // namespace normd::kernels::reference
