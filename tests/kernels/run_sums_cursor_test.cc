// cpu::RunSumsCursor: the next run's statistics summed by ApplyRun while it writes the
// current run (channels-first GroupNorm, InstanceNorm and BatchNorm training) must give the
// bits of cpu::RunMoments without f64 on the same run, which the statistics tests hold to
// docs/semantics.md's rule, and must leave ApplyRun's output as it is without a cursor: on
// every SIMD target, every input dtype, output in the input's dtype and in f32, stored and
// streamed, with the run written in one to three ApplyRun calls (GroupNorm's channels) or in
// fewer elements than the cursor's (FinishRunSums sums the rest), on random data, data the
// one pass rejects (offset from zero, a first element far out, constant, NaN), and lengths
// on and off the sixteen-vector blocks.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/channel_norm_simd.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ForEachTarget;

struct Data {
  std::string name;
  float (*value)(std::mt19937_64& rng, int64_t i);
};

std::vector<Data> Cases() {
  return {
      {"random", [](std::mt19937_64& rng,
                    int64_t) { return std::normal_distribution<float>(0.5f, 2.0f)(rng); }},
      {"offset 1e4",
       [](std::mt19937_64& rng, int64_t) {
         return 1e4f + std::normal_distribution<float>(0.0f, 1.0f)(rng);
       }},
      {"first far out",
       [](std::mt19937_64& rng, int64_t i) {
         return i == 0 ? 3e4f : std::normal_distribution<float>(0.0f, 1.0f)(rng);
       }},
      {"constant", [](std::mt19937_64&, int64_t) { return 3.25f; }},
      {"a NaN",
       [](std::mt19937_64& rng, int64_t i) {
         return i == 5 ? NAN : std::normal_distribution<float>(0.0f, 1.0f)(rng);
       }},
  };
}

// Bits of a double, so that NaN results compare too.
uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

TEST(RunSumsCursorTest, GivesRunMomentsBitsAndLeavesTheOutput) {
  ForEachTarget([] {
    std::mt19937_64 rng(61);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (DType out : {t, DType::kF32}) {
        for (int64_t n : {1, 7, 200, 513, 3136, 4097, 6272, 65536}) {
          for (const Data& c : Cases()) {
            // The run written, and after it the run summed (adjacent, as in the callers).
            std::vector<float> values(2 * n);
            for (int64_t i = 0; i < n; ++i) values[i] = c.value(rng, i);
            for (int64_t i = 0; i < n; ++i) values[n + i] = c.value(rng, i);
            const Buffer x = Buffer::Of(t, values);
            const void* next = x.bytes.data() + n * ElementSize(t);
            double want_mean, want_m2;
            cpu::RunMoments(t, next, n, /*f64=*/false, &want_mean, &want_m2);
            for (bool stream : {false, true}) {
              Buffer plain(out, n);
              cpu::ApplyRun(t, x.bytes.data(), n, 0.25, 1.5, -0.75, out, plain.bytes.data(),
                            stream);
              // Parts as GroupNorm's channels; the last, shorter than the run, leaves blocks
              // for FinishRunSums.
              for (int64_t parts : {1, 2, 3, -2}) {
                const std::string what =
                    absl::StrCat(c.name, ", ", DTypeName(t), " -> ", DTypeName(out), ", n ", n,
                                 stream ? ", streamed" : "", ", parts ", parts);
                Buffer y(out, n);
                cpu::RunSumsCursor sums;
                cpu::BeginRunSums(t, next, n, &sums);
                const int64_t count = parts > 0 ? parts : -parts;
                const int64_t written = parts > 0 ? n : n / 2;
                for (int64_t p = 0; p < count; ++p) {
                  const int64_t begin = written * p / count, end = written * (p + 1) / count;
                  cpu::ApplyRun(t, x.bytes.data() + begin * ElementSize(t), end - begin, 0.25, 1.5,
                                -0.75, out, y.bytes.data() + begin * ElementSize(out), stream,
                                nullptr, &sums);
                }
                if (written < n) {
                  cpu::ApplyRun(t, x.bytes.data() + written * ElementSize(t), n - written, 0.25,
                                1.5, -0.75, out, y.bytes.data() + written * ElementSize(out),
                                stream);
                }
                cpu::FenceStreams();
                double mean, m2;
                cpu::FinishRunSums(&sums, &mean, &m2);
                EXPECT_EQ(Bits(mean), Bits(want_mean))
                    << what << ": " << mean << " vs " << want_mean;
                EXPECT_EQ(Bits(m2), Bits(want_m2)) << what << ": " << m2 << " vs " << want_m2;
                EXPECT_EQ(y.bytes, plain.bytes) << what;
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace normd::kernels
