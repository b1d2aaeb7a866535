#include "kernels/bench/bench_check.h"

#include <algorithm>
#include <cmath>

namespace normd::kernels::bench {

double Difference(DType t, const void* a, const void* b, int64_t n) {
  double diff = 0, top = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = LoadElement(t, a, i), y = LoadElement(t, b, i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::fabs(x - y));
    top = std::max(top, std::fabs(y));
  }
  return top > 0 ? diff / top : diff;
}

double Tolerance(DType t) {
  switch (t) {
    case DType::kF32:
      return 2e-4;
    case DType::kF16:
      return 4.0 / 1024;
    case DType::kBF16:
      return 4.0 / 128;
  }
  return 0;
}

}  // namespace normd::kernels::bench
