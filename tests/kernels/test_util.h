// Helpers for tests that compare a backend with the float64 reference: typed byte
// buffers, random and adversarial data, and the accuracy rule of docs/semantics.md.
// Not thread-safe (tests are single-threaded).
#ifndef NORMD_TESTS_KERNELS_TEST_UTIL_H_
#define NORMD_TESTS_KERNELS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "normd/kernels/accuracy.h"
#include "normd/kernels/dtype.h"
#include "normd/kernels/tensor.h"

namespace normd::testing {

using kernels::DType;

// An owning, typed buffer of elements.
struct Buffer {
  DType dtype = DType::kF32;
  int64_t numel = 0;
  std::vector<unsigned char> bytes;

  Buffer() = default;
  Buffer(DType t, int64_t n) : dtype(t), numel(n), bytes(n * kernels::ElementSize(t)) {}
  static Buffer Of(DType t, const std::vector<float>& values) {
    Buffer b(t, static_cast<int64_t>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) b.view_mut().set(i, values[i]);
    return b;
  }
  kernels::ConstTensor view() const { return {dtype, bytes.data(), numel}; }
  kernels::MutTensor view_mut() { return {dtype, bytes.data(), numel}; }
  float at(int64_t i) const { return view().at(i); }
};

inline std::vector<float> RandomValues(std::mt19937_64& rng, int64_t n, float mean = 0,
                                       float stddev = 1) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

using kernels::OrderedBits;
using kernels::RoundDouble;

// n >= 16 values of dtype t, normal(0.5, 2), 16 of them 0.51171875 (exact in every dtype),
// the row's mean steered to about 1.5e-6 below that by three elements, each correction
// finer than the last: LayerNorm's outputs there lie within about 1e-6 of zero, where one
// bf16 ulp is 2^-8 of the output, so the row's mean must be right to about 2^-30 of itself.
// fp32 deviations from an fp32 shift miss that: each drops the shift's low bits, the same
// ones for every value of a binade, and over a row those errors add up (a mean 3e-8 off).
inline std::vector<float> NearMeanRow(std::mt19937_64& rng, DType t, int64_t n) {
  std::vector<float> x = RandomValues(rng, n, 0.5f, 2.0f);
  for (float& v : x) v = RoundDouble(t, v);
  const float r = 0.51171875f;
  for (int64_t i = 0; i < 16; ++i) x[i * (n / 16)] = r;
  for (const int64_t j : {n / 3 + 1, n / 2 + 1, 2 * n / 3 + 1}) {
    double sum = 0;
    for (const float v : x) sum += v;
    x[j] = RoundDouble(t, x[j] + ((r - 1.5e-6) * static_cast<double>(n) - sum));
  }
  return x;
}

// docs/semantics.md's rule (normd/kernels/accuracy.h), with a message saying by how much
// a value missed it.
inline ::testing::AssertionResult Matches(DType t, float y, double ref, double magnitude = 0,
                                          double alt = std::nan("")) {
  if (kernels::WithinAccuracy(t, y, ref, magnitude, alt)) return ::testing::AssertionSuccess();
  if (t == DType::kF32 || std::isnan(ref) || std::isnan(y)) {
    return ::testing::AssertionFailure()
           << "got " << y << ", reference " << ref << ", |diff| " << std::fabs(y - ref);
  }
  return ::testing::AssertionFailure() << "got " << y << ", reference " << ref << " (rounded "
                                       << RoundDouble(t, ref) << "), more than 1 ulp apart";
}

// Checks every element; stops at the first few mismatches to keep output readable.
// `magnitude`: the reference's M per element, for outputs that sum terms after normalizing
// (empty: the rule's third clause does not apply); `alt`: the reference's other value under
// cast_before_weight (reference::RowNormResult::y_alt; empty: none).
inline void ExpectAllMatch(const Buffer& got, const std::vector<double>& ref,
                           const std::string& what, const std::vector<double>& magnitude = {},
                           const std::vector<double>& alt = {}) {
  ASSERT_EQ(got.numel, static_cast<int64_t>(ref.size())) << what;
  if (!magnitude.empty()) ASSERT_EQ(magnitude.size(), ref.size()) << what;
  if (!alt.empty()) ASSERT_EQ(alt.size(), ref.size()) << what;
  int failures = 0;
  for (int64_t i = 0; i < got.numel && failures < 5; ++i) {
    auto r = Matches(got.dtype, got.at(i), ref[i], magnitude.empty() ? 0.0 : magnitude[i],
                     alt.empty() ? std::nan("") : alt[i]);
    if (!r) {
      ADD_FAILURE() << what << " element " << i << ": " << r.message();
      ++failures;
    }
  }
}

// Runs fn once per SIMD target this binary has and this CPU supports, with Highway's
// dynamic dispatch pinned to it, so every compiled kernel variant meets the same checks.
template <class F>
void ForEachTarget(F fn) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace normd::testing

#endif  // NORMD_TESTS_KERNELS_TEST_UTIL_H_
