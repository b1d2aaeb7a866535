// CPU BatchNorm, GroupNorm and InstanceNorm against the float64 reference, for every
// dtype and both layouts, on random and adversarial data.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ExpectAllMatch;
using normd::testing::ForEachTarget;
using normd::testing::RandomValues;

struct Shape {
  int64_t n, c, s;
};

class ChannelNormTest : public ::testing::TestWithParam<std::tuple<DType, Layout>> {
 protected:
  std::string Name(const char* op, const Shape& sh, const char* extra = "") const {
    const auto& [dtype, layout] = GetParam();
    return absl::StrCat(op, " ", DTypeName(dtype),
                        layout == Layout::kChannelsFirst ? " NC*" : " N*C", " [", sh.n, ",", sh.c,
                        ",", sh.s, "] ", extra);
  }
  std::mt19937_64 rng_{17};
};

void CheckBatchNorm(DType dtype, Layout layout, const Shape& sh, bool training, bool affine,
                    bool running, const std::vector<float>& x_values, std::mt19937_64& rng,
                    const std::string& what, const CpuBackendOptions& cpu_options = {}) {
  const DType pt = (rng() & 1) ? dtype : DType::kF32;
  Buffer x = Buffer::Of(dtype, x_values);
  Buffer w = Buffer::Of(pt, RandomValues(rng, sh.c, 1, 0.3f));
  Buffer b = Buffer::Of(pt, RandomValues(rng, sh.c));
  Buffer rm = Buffer::Of(pt, RandomValues(rng, sh.c, 0.5f, 1));
  std::vector<float> rv_values = RandomValues(rng, sh.c);
  for (auto& v : rv_values) v = 0.5f + v * v;
  Buffer rv = Buffer::Of(pt, rv_values);
  Buffer y(dtype, sh.n * sh.c * sh.s), mean(DType::kF32, sh.c), var(DType::kF32, sh.c);
  Buffer rm_out(pt, sh.c), rv_out(pt, sh.c);

  BatchNormArgs a;
  a.n = sh.n;
  a.c = sh.c;
  a.s = sh.s;
  a.layout = layout;
  a.x = x.view();
  if (affine) {
    a.weight = w.view();
    a.bias = b.view();
  }
  if (running || !training) {
    a.running_mean = rm.view();
    a.running_var = rv.view();
  }
  a.training = training;
  a.momentum = 0.1;
  a.eps = 1e-5;
  a.y = y.view_mut();
  if (training) {
    a.batch_mean = mean.view_mut();
    a.batch_var = var.view_mut();
    if (running) {
      a.running_mean_out = rm_out.view_mut();
      a.running_var_out = rv_out.view_mut();
    }
  }
  CpuBackend cpu(cpu_options);
  ASSERT_TRUE(cpu.BatchNorm(a).ok());
  const reference::BatchNormResult ref = reference::BatchNorm(a);
  ExpectAllMatch(y, ref.y, what + " y", ref.magnitude);
  if (training) {
    ExpectAllMatch(mean, ref.mean, what + " mean");
    ExpectAllMatch(var, ref.var, what + " var");
    if (running) {
      ExpectAllMatch(rm_out, ref.running_mean, what + " running_mean");
      ExpectAllMatch(rv_out, ref.running_var, what + " running_var");
    }
  }
}

void CheckGroupNorm(DType dtype, Layout layout, const Shape& sh, int64_t groups, bool affine,
                    const std::vector<float>& x_values, std::mt19937_64& rng,
                    const std::string& what, const CpuBackendOptions& cpu_options = {}) {
  const DType pt = (rng() & 1) ? dtype : DType::kF32;
  Buffer x = Buffer::Of(dtype, x_values);
  Buffer w = Buffer::Of(pt, RandomValues(rng, sh.c, 1, 0.3f));
  Buffer b = Buffer::Of(pt, RandomValues(rng, sh.c));
  Buffer y(dtype, sh.n * sh.c * sh.s);
  GroupNormArgs a;
  a.n = sh.n;
  a.c = sh.c;
  a.s = sh.s;
  a.groups = groups;
  a.layout = layout;
  a.x = x.view();
  if (affine) {
    a.weight = w.view();
    a.bias = b.view();
  }
  a.eps = 1e-5;
  a.y = y.view_mut();
  CpuBackend cpu(cpu_options);
  ASSERT_TRUE(cpu.GroupNorm(a).ok());
  const reference::GroupNormResult ref = reference::GroupNorm(a);
  ExpectAllMatch(y, ref.y, what, ref.magnitude);
}

TEST_P(ChannelNormTest, BatchNormMatchesReference) {
  ForEachTarget([&] {
    const auto& [dtype, layout] = GetParam();
    // C = 64: channels-last rows of exactly four vectors on AVX-512 (ApplyFourVectorRows).
    for (Shape sh :
         {Shape{2, 3, 5}, Shape{4, 16, 64}, Shape{1, 2, 9000}, Shape{8, 1, 1}, Shape{2, 64, 9}}) {
      const auto n = sh.n * sh.c * sh.s;
      for (bool training : {true, false}) {
        for (bool affine : {false, true}) {
          CheckBatchNorm(dtype, layout, sh, training, affine, /*running=*/true,
                         RandomValues(rng_, n, 0.3f, 2), rng_,
                         Name("batch_norm", sh, training ? "train" : "eval"));
        }
      }
      CheckBatchNorm(dtype, layout, sh, true, true, /*running=*/false,
                     RandomValues(rng_, n, 0.3f, 2), rng_, Name("batch_norm", sh, "no running"));
    }
  });
}

TEST_P(ChannelNormTest, BatchNormAdversarial) {
  ForEachTarget([&] {
    const auto& [dtype, layout] = GetParam();
    const Shape sh{4, 3, 4097};
    const auto n = sh.n * sh.c * sh.s;
    CheckBatchNorm(dtype, layout, sh, true, true, true, RandomValues(rng_, n, 1e4f, 1), rng_,
                   Name("batch_norm", sh, "mean 1e4 var 1"));
    CheckBatchNorm(dtype, layout, sh, true, false, true, RandomValues(rng_, n, 1e6f, 1e-3f), rng_,
                   Name("batch_norm", sh, "1e6 spread 1e-3"));
    CheckBatchNorm(dtype, layout, sh, true, true, true, std::vector<float>(n, -7.5f), rng_,
                   Name("batch_norm", sh, "constant"));
    CheckBatchNorm(dtype, layout, sh, true, true, true, RandomValues(rng_, n, 0, 3000), rng_,
                   Name("batch_norm", sh, "large"));
  });
}

TEST_P(ChannelNormTest, GroupNormMatchesReference) {
  ForEachTarget([&] {
    const auto& [dtype, layout] = GetParam();
    struct Case {
      Shape sh;
      int64_t groups;
    };
    for (const Case& c : {Case{{2, 8, 4}, 4}, Case{{2, 8, 4}, 1}, Case{{2, 8, 4}, 8},
                          Case{{3, 32, 49}, 32}, Case{{2, 64, 130}, 8}, Case{{1, 6, 1}, 3}}) {
      for (bool affine : {false, true}) {
        CheckGroupNorm(dtype, layout, c.sh, c.groups, affine,
                       RandomValues(rng_, c.sh.n * c.sh.c * c.sh.s, -0.4f, 1.5f), rng_,
                       Name("group_norm", c.sh, absl::StrCat("G=", c.groups).c_str()));
      }
    }
  });
}

TEST_P(ChannelNormTest, InstanceNormIsGroupNormPerChannel) {
  ForEachTarget([&] {
    const auto& [dtype, layout] = GetParam();
    const Shape sh{2, 5, 4097};
    const auto n = sh.n * sh.c * sh.s;
    CheckGroupNorm(dtype, layout, sh, sh.c, true, RandomValues(rng_, n), rng_,
                   Name("instance_norm", sh));
    CheckGroupNorm(dtype, layout, sh, sh.c, true, RandomValues(rng_, n, 1e4f, 1), rng_,
                   Name("instance_norm", sh, "mean 1e4 var 1"));
    CheckGroupNorm(dtype, layout, sh, sh.c, false, std::vector<float>(n, 2.0f), rng_,
                   Name("instance_norm", sh, "constant"));
  });
}

// The statistics take one pass of sums shifted by a run's first element (or a block's first
// row) where that is exact, else two (kernels/cpu/shifted_sums-inl.h): a spike at every
// shift (about 64 to 128 sigma from the mean, past the one-pass guard) sends them down the
// two-pass path, the rest of the tensor's runs down the one-pass one; runs and blocks longer
// than 2^16 elements or rows are summed in pieces and merged.
TEST_P(ChannelNormTest, OnePassStatisticsFallBackAndMergePieces) {
  ForEachTarget([&] {
    const auto& [dtype, layout] = GetParam();
    const bool cf = layout == Layout::kChannelsFirst;
    for (Shape sh : {Shape{4, 3, 4097}, Shape{2, 2, 70000}, Shape{1, 1, 140000}}) {
      const auto n = sh.n * sh.c * sh.s;
      std::vector<float> spiked = RandomValues(rng_, n, 0.5f, 1);
      for (int64_t c = 0; c < sh.c; ++c) spiked[cf ? c * sh.s : c] = 1e4f;  // sample 0, s = 0
      CheckBatchNorm(dtype, layout, sh, true, true, true, spiked, rng_,
                     Name("batch_norm", sh, "spike at the shift"));
      CheckGroupNorm(dtype, layout, sh, sh.c, true, spiked, rng_,
                     Name("instance_norm", sh, "spike at the shift"));
      CheckBatchNorm(dtype, layout, sh, true, true, true, RandomValues(rng_, n, 1e4f, 1), rng_,
                     Name("batch_norm", sh, "mean 1e4 var 1"));
      CheckGroupNorm(dtype, layout, sh, 1, true, RandomValues(rng_, n, -3e3f, 0.5f), rng_,
                     Name("group_norm", sh, "G=1 mean -3e3"));
    }
  });
}

// The parallel paths (split statistics merged by Chan's formula, channels and groups
// spread over the pool) on shapes far below the size that normally takes them: the
// threshold forced to 0, three threads on any machine.
TEST_P(ChannelNormTest, ParallelPathsMatchReference) {
  CpuBackendOptions parallel;
  parallel.min_parallel_bytes = 0;
  parallel.threads = 3;
  ForEachTarget([&] {
    const auto& [dtype, layout] = GetParam();
    for (Shape sh : {Shape{2, 3, 5}, Shape{4, 16, 64}, Shape{1, 2, 9000}, Shape{7, 5, 13}}) {
      const auto n = sh.n * sh.c * sh.s;
      for (bool training : {true, false}) {
        CheckBatchNorm(dtype, layout, sh, training, /*affine=*/true, /*running=*/true,
                       RandomValues(rng_, n, 0.3f, 2), rng_,
                       Name("batch_norm", sh, training ? "parallel train" : "parallel eval"),
                       parallel);
      }
      CheckBatchNorm(dtype, layout, sh, true, true, true, RandomValues(rng_, n, 1e4f, 1), rng_,
                     Name("batch_norm", sh, "parallel mean 1e4 var 1"), parallel);
    }
    struct Case {
      Shape sh;
      int64_t groups;
    };
    for (const Case& c : {Case{{2, 8, 4}, 4}, Case{{3, 32, 49}, 32}, Case{{2, 64, 130}, 8},
                          Case{{5, 6, 1000}, 3}, Case{{1, 4, 4097}, 1}}) {
      CheckGroupNorm(dtype, layout, c.sh, c.groups, /*affine=*/true,
                     RandomValues(rng_, c.sh.n * c.sh.c * c.sh.s, -0.4f, 1.5f), rng_,
                     Name("group_norm", c.sh, absl::StrCat("parallel G=", c.groups).c_str()),
                     parallel);
    }
  });
}

// Outputs beyond the cache go out with non-temporal stores (stream_bytes), from any
// alignment of y: the bytes must be those of plain stores, for BatchNorm (training and
// inference) and GroupNorm in both layouts, at every element offset within a vector.
TEST_P(ChannelNormTest, StreamedOutputsEqualPlainOnes) {
  const DType dtype = std::get<0>(GetParam());
  const Layout layout = std::get<1>(GetParam());
  CpuBackendOptions never, always;
  never.stream_bytes = int64_t{1} << 60;
  always.stream_bytes = 0;
  ForEachTarget([&] {
    // Runs of 83 and 37: heads, vectors and tails; C = 16 and 64 per row (64: four vectors
    // on AVX-512, 16 on SSE4, held in registers).
    for (const Shape sh : {Shape{3, 16, 83}, Shape{2, 64, 37}}) {
      const int64_t n = sh.n * sh.c * sh.s;
      const Buffer x = Buffer::Of(dtype, RandomValues(rng_, n, 0.5f, 2.0f));
      const Buffer w = Buffer::Of(DType::kF32, RandomValues(rng_, sh.c, 1.0f, 0.5f));
      const Buffer b = Buffer::Of(DType::kF32, RandomValues(rng_, sh.c, 0.0f, 0.5f));
      const Buffer rm = Buffer::Of(DType::kF32, RandomValues(rng_, sh.c, 0.5f, 0.1f));
      const Buffer rv = Buffer::Of(DType::kF32, RandomValues(rng_, sh.c, 4.0f, 0.1f));
      const size_t esize = ElementSize(dtype);
      for (size_t offset = 0; offset < 64 / esize; offset += 3) {
        for (int op = 0; op < 3; ++op) {
          std::vector<unsigned char> plain((n + 64) * esize), streamed(plain.size());
          const auto run = [&](const CpuBackendOptions& o, std::vector<unsigned char>& into) {
            const MutTensor y{dtype, into.data() + offset * esize, n};
            if (op == 2) {
              GroupNormArgs a;
              a.n = sh.n, a.c = sh.c, a.s = sh.s, a.groups = 4, a.layout = layout;
              a.x = x.view(), a.weight = w.view(), a.bias = b.view(), a.y = y;
              return CpuBackend(o).GroupNorm(a);
            }
            BatchNormArgs a;
            a.n = sh.n, a.c = sh.c, a.s = sh.s, a.layout = layout, a.training = op == 0;
            a.x = x.view(), a.weight = w.view(), a.bias = b.view(), a.y = y;
            a.running_mean = rm.view(), a.running_var = rv.view();
            return CpuBackend(o).BatchNorm(a);
          };
          ASSERT_TRUE(run(never, plain).ok());
          ASSERT_TRUE(run(always, streamed).ok());
          ASSERT_EQ(plain, streamed) << "op " << op << ", offset " << offset;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypesAndLayouts, ChannelNormTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                       ::testing::Values(Layout::kChannelsFirst, Layout::kChannelsLast)),
    [](const auto& info) {
      return absl::StrCat(DTypeName(std::get<0>(info.param)),
                          std::get<1>(info.param) == Layout::kChannelsFirst ? "_NCHW" : "_NHWC");
    });

}  // namespace
}  // namespace normd::kernels
