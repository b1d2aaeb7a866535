// CPU LayerNorm / RMSNorm / L2Norm (and their residual fusions) against the float64
// reference, for every dtype, on random shapes and on docs/semantics.md's adversarial rows.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ExpectAllMatch;
using normd::testing::ForEachTarget;
using normd::testing::NearMeanRow;
using normd::testing::RandomValues;

// One configuration of the row-norm options.
struct Config {
  std::string name;
  RowNormKind kind;
  bool weight = false, bias = false;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  double weight_offset = 0, partial_fraction = 1;
  bool cast_before_weight = false;
  ResidualPlacement residual = ResidualPlacement::kNone;
  double alpha = 1;
  double eps = -1;  // < 0: the kind's default
};

std::vector<Config> AllConfigs() {
  using K = RowNormKind;
  using R = ResidualPlacement;
  return {
      {"layer", K::kLayer},
      {"layer_affine", K::kLayer, true, true},
      {"layer_add_to_std", K::kLayer, true, false, EpsPlacement::kOutsideSqrt},
      {"layer_add_then_norm", K::kLayer, true, true, {}, 0, 1, false, R::kAddThenNorm, 1.0},
      {"layer_deepnorm", K::kLayer, true, true, {}, 0, 1, false, R::kAddThenNorm, 2.2133638},
      {"layer_norm_then_add", K::kLayer, false, false, {}, 0, 1, false, R::kNormThenAdd, 0.5},
      {"rms", K::kRms},
      {"rms_weight", K::kRms, true},
      {"rms_offset", K::kRms, true, false, {}, 1.0},
      {"rms_partial", K::kRms, true, false, {}, 0, 0.3},
      {"rms_add_to_rms", K::kRms, true, false, EpsPlacement::kOutsideSqrt},
      {"rms_cast_before_weight", K::kRms, true, false, {}, 0, 1, true},
      {"rms_hf_norm_then_add", K::kRms, true, false, {}, 0, 1, true, R::kNormThenAdd, 0.5},
      {"rms_add_then_norm", K::kRms, true, false, {}, 0, 1, false, R::kAddThenNorm, 1.0},
      {"rms_norm_then_add", K::kRms, true, false, {}, 1.0, 1, false, R::kNormThenAdd, 1.5},
      {"l2", K::kL2},
      {"l2_eps_large", K::kL2, false, false, {}, 0, 1, false, R::kNone, 1, 1e-2},
  };
}

double DefaultEps(RowNormKind k) {
  return k == RowNormKind::kLayer
             ? kDefaultLayerNormEps
             : (k == RowNormKind::kRms ? kDefaultRmsNormEps : kDefaultL2NormEps);
}

// Runs the CPU backend and the reference on x (and skip), checks y and h.
void CheckRowNorm(const Config& cfg, DType dtype, int64_t rows, int64_t cols,
                  const std::vector<float>& x_values, const std::vector<float>& skip_values,
                  std::mt19937_64& rng, const std::string& what, DType out_dtype) {
  Buffer x = Buffer::Of(dtype, x_values);
  Buffer skip = Buffer::Of(dtype, skip_values);
  // Parameters in F32 for half inputs half of the time: both are allowed.
  const DType param_dtype = (rng() & 1) ? dtype : DType::kF32;
  Buffer weight = Buffer::Of(param_dtype, RandomValues(rng, cols, 1.0f, 0.5f));
  Buffer bias = Buffer::Of(param_dtype, RandomValues(rng, cols, 0.0f, 0.5f));
  Buffer y(out_dtype, rows * cols), h(dtype, rows * cols);

  RowNormArgs a;
  a.kind = cfg.kind;
  a.rows = rows;
  a.cols = cols;
  a.x = x.view();
  if (cfg.weight) a.weight = weight.view();
  if (cfg.bias) a.bias = bias.view();
  a.eps = cfg.eps >= 0 ? cfg.eps : DefaultEps(cfg.kind);
  a.eps_placement = cfg.eps_placement;
  a.weight_offset = cfg.weight_offset;
  a.partial_fraction = cfg.partial_fraction;
  a.cast_before_weight = cfg.cast_before_weight;
  a.residual = cfg.residual;
  a.alpha = cfg.alpha;
  if (cfg.residual != ResidualPlacement::kNone) a.skip = skip.view();
  a.y = y.view_mut();
  if (cfg.residual == ResidualPlacement::kAddThenNorm) a.h = h.view_mut();

  const reference::RowNormResult ref = reference::RowNorm(a);
  // Outputs in cache and outputs streamed past it: a large row reads its source another
  // way (RowSource: f16/bf16 in place, and with a residual from 4096 columns h formed again
  // from x and skip), so both are held to the reference.
  CpuBackendOptions in_cache, streamed;
  in_cache.stream_bytes = int64_t{1} << 60;
  streamed.stream_bytes = 0;
  for (const CpuBackendOptions& options : {in_cache, streamed}) {
    const std::string how = options.stream_bytes == 0 ? " streamed" : "";
    ASSERT_TRUE(CpuBackend(options).RowNorm(a).ok());
    ExpectAllMatch(y, ref.y, what + how + " y", ref.magnitude, ref.y_alt);
    if (a.h.present()) ExpectAllMatch(h, ref.h, what + how + " h");
  }
}

// n values of magnitude 1.5 alternating in sign, n even: their sum is exactly zero in any
// order of addition (every partial sum is a small multiple of 1.5); an odd n ends in 1.5.
std::vector<float> ZeroMeanValues(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i % 2 == 0 ? 1.5f : -1.5f;
  return v;
}

class RowNormTest : public ::testing::TestWithParam<std::tuple<Config, DType>> {};

TEST_P(RowNormTest, MatchesReferenceOnRandomShapes) {
  ForEachTarget([&] {
    const auto& [cfg, dtype] = GetParam();
    std::mt19937_64 rng(42);
    for (int64_t cols : {1, 3, 64, 4097, 8192}) {
      for (int64_t rows : {1, 5}) {
        const int64_t n = rows * cols;
        CheckRowNorm(cfg, dtype, rows, cols, RandomValues(rng, n, 0.5f, 2.0f), RandomValues(rng, n),
                     rng, absl::StrCat(cfg.name, " ", DTypeName(dtype), " ", rows, "x", cols),
                     dtype);
      }
    }
  });
}

TEST_P(RowNormTest, OutputDtypeMayDifferFromInput) {
  ForEachTarget([&] {
    const auto& [cfg, dtype] = GetParam();
    std::mt19937_64 rng(5);
    for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
      CheckRowNorm(cfg, dtype, 3, 100, RandomValues(rng, 300), RandomValues(rng, 300), rng,
                   absl::StrCat(cfg.name, " ", DTypeName(dtype), "->", DTypeName(out)), out);
    }
  });
}

TEST_P(RowNormTest, MatchesReferenceOnAdversarialRows) {
  ForEachTarget([&] {
    const auto& [cfg, dtype] = GetParam();
    std::mt19937_64 rng(3);
    const int64_t cols = 4097;
    struct Case {
      std::string name;
      std::vector<float> values;
    };
    std::vector<Case> cases = {
        {"mean 1e4 var 1", RandomValues(rng, cols, 1e4f, 1.0f)},
        {"1e6 spread 1e-3", RandomValues(rng, cols, 1e6f, 1e-3f)},
        {"constant", std::vector<float>(cols, 3.25f)},
        {"|x| >= 256 (f16 squares overflow)", RandomValues(rng, cols, 0.0f, 3000.0f)},
        {"tiny", RandomValues(rng, cols, 0.0f, 1e-3f)},
        // A mean of exactly zero: a LayerNorm row without a bias then takes the epilogue
        // without a mean (NoMean), which the one-loop pass leaves to the two passes.
        {"zero mean", ZeroMeanValues(cols)},
        {"outputs near zero", NearMeanRow(rng, dtype, cols)},
    };
    for (const Case& c : cases) {
      if (cfg.kind == RowNormKind::kL2 && c.name == "constant") continue;
      CheckRowNorm(cfg, dtype, 1, cols, c.values, RandomValues(rng, cols), rng,
                   absl::StrCat(cfg.name, " ", DTypeName(dtype), " ", c.name), dtype);
      // Three such rows of 4096 columns, between random rows: streamed, a large row read in
      // place without a residual added before its statistics takes the next row's sums in
      // its epilogue's loop (fused_rows.cc), so each row's statistics are read there.
      const int64_t wide = 4096;
      std::vector<float> five = RandomValues(rng, wide);
      for (int k = 0; k < 3; ++k) {
        five.insert(five.end(), c.values.begin(), c.values.begin() + wide);
      }
      const std::vector<float> last = RandomValues(rng, wide);
      five.insert(five.end(), last.begin(), last.end());
      CheckRowNorm(cfg, dtype, 5, wide, five, RandomValues(rng, 5 * wide), rng,
                   absl::StrCat(cfg.name, " ", DTypeName(dtype), " ", c.name, " x3 of 4096"),
                   dtype);
    }
    // A single-element row.
    CheckRowNorm(cfg, dtype, 7, 1, RandomValues(rng, 7), RandomValues(rng, 7), rng,
                 absl::StrCat(cfg.name, " ", DTypeName(dtype), " single element"), dtype);
  });
}

std::string ParamName(const ::testing::TestParamInfo<RowNormTest::ParamType>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_", DTypeName(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllOptions, RowNormTest,
                         ::testing::Combine(::testing::ValuesIn(AllConfigs()),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16)),
                         ParamName);

TEST(RowNormExampleTest, CompiledTargetsIncludeAFallback) {
#ifdef HWY_COMPILE_ONLY_STATIC
  GTEST_SKIP() << "a sanitized build compiles the machine's own target only (CMakeLists.txt)";
#endif
  std::vector<std::string> names;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) names.push_back(hwy::TargetName(t));
  RecordProperty("targets", absl::StrJoin(names, ","));
  EXPECT_GE(names.size(), 2u) << absl::StrJoin(names, ",");
}

TEST(RowNormExampleTest, RmsNormOfTheSpecExample) {
  Buffer x = Buffer::Of(DType::kF32, {3, -1, 4, -2});
  Buffer y(DType::kF32, 4);
  RowNormArgs a;
  a.kind = RowNormKind::kRms;
  a.rows = 1;
  a.cols = 4;
  a.x = x.view();
  a.eps = 0;
  a.y = y.view_mut();
  CpuBackend cpu;
  ASSERT_TRUE(cpu.RowNorm(a).ok());
  const float want[] = {1.0954f, -0.3651f, 1.4606f, -0.7303f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.at(i), want[i], 5e-5) << i;
}

TEST(RowNormExampleTest, NonFiniteInputsPoisonOnlyTheirRow) {
  Buffer x = Buffer::Of(DType::kF32, {1, NAN, 3, 1, 2, 3, INFINITY, 1, 2});
  Buffer y(DType::kF32, 9);
  for (RowNormKind kind : {RowNormKind::kLayer, RowNormKind::kRms}) {
    RowNormArgs a;
    a.kind = kind;
    a.rows = 3;
    a.cols = 3;
    a.x = x.view();
    a.eps = 1e-5;
    a.y = y.view_mut();
    CpuBackend cpu;
    ASSERT_TRUE(cpu.RowNorm(a).ok());
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y.at(i))) << i;
    for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isfinite(y.at(i))) << i;
    // An Inf makes the row's statistic Inf: LayerNorm gives NaN everywhere; RMSNorm's
    // formula gives x * 0 (NaN for the Inf itself), as PyTorch's does.
    EXPECT_TRUE(std::isnan(y.at(6)));
    if (kind == RowNormKind::kLayer) {
      EXPECT_TRUE(std::isnan(y.at(7)));
    } else {
      EXPECT_EQ(y.at(7), 0.0f);
    }
    const reference::RowNormResult ref = reference::RowNorm(a);
    ExpectAllMatch(y, ref.y, "non-finite rows");
  }
}

TEST(RowNormExampleTest, ConstantRowWithEpsGivesBias) {
  Buffer x = Buffer::Of(DType::kF32, {5, 5, 5, 5});
  Buffer bias = Buffer::Of(DType::kF32, {1, 2, 3, 4});
  Buffer y(DType::kF32, 4);
  RowNormArgs a;
  a.kind = RowNormKind::kLayer;
  a.rows = 1;
  a.cols = 4;
  a.x = x.view();
  a.bias = bias.view();
  a.eps = 1e-5;
  a.y = y.view_mut();
  CpuBackend cpu;
  ASSERT_TRUE(cpu.RowNorm(a).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.at(i), i + 1);
}

// A ragged batch (every config, different shapes and dtypes in one run, large enough to be
// split across the pool mid-segment) is bit-identical to each segment run alone.
TEST(RowNormBatchTest, SegmentsAreBitIdenticalToSeparateRuns) {
  ForEachTarget([&] {
    std::mt19937_64 rng(7);
    struct Owned {
      Buffer x, skip, weight, bias, y_alone, h_alone, y_batch, h_batch;
    };
    std::vector<Owned> owned;
    std::vector<RowNormArgs> alone, batch;
    const std::vector<Config> configs = AllConfigs();
    owned.reserve(configs.size() * 3);
    int i = 0;
    for (const Config& cfg : configs) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        const int64_t cols = std::vector<int64_t>{1, 3, 64, 300, 4097}[i % 5];
        const int64_t rows = 1 + (i * 7) % 40;
        ++i;
        const int64_t n = rows * cols;
        Owned& o = owned.emplace_back();
        o.x = Buffer::Of(dtype, RandomValues(rng, n, 0.5f, 2.0f));
        o.skip = Buffer::Of(dtype, RandomValues(rng, n));
        o.weight = Buffer::Of(dtype, RandomValues(rng, cols, 1.0f, 0.5f));
        o.bias = Buffer::Of(dtype, RandomValues(rng, cols));
        for (Buffer* b : {&o.y_alone, &o.y_batch, &o.h_alone, &o.h_batch}) *b = Buffer(dtype, n);
        RowNormArgs a;
        a.kind = cfg.kind;
        a.rows = rows;
        a.cols = cols;
        a.x = o.x.view();
        if (cfg.weight) a.weight = o.weight.view();
        if (cfg.bias) a.bias = o.bias.view();
        a.eps = cfg.eps >= 0 ? cfg.eps : DefaultEps(cfg.kind);
        a.eps_placement = cfg.eps_placement;
        a.weight_offset = cfg.weight_offset;
        a.partial_fraction = cfg.partial_fraction;
        a.cast_before_weight = cfg.cast_before_weight;
        a.residual = cfg.residual;
        a.alpha = cfg.alpha;
        if (cfg.residual != ResidualPlacement::kNone) a.skip = o.skip.view();
        RowNormArgs b = a;
        a.y = o.y_alone.view_mut();
        b.y = o.y_batch.view_mut();
        if (cfg.residual == ResidualPlacement::kAddThenNorm) {
          a.h = o.h_alone.view_mut();
          b.h = o.h_batch.view_mut();
        }
        alone.push_back(a);
        batch.push_back(b);
      }
    }
    CpuBackendOptions options;
    // Uneven chunks that start and end inside segments; and so rows paired differently
    // from the runs alone (rows with a weight and bias go two at a time from each chunk's
    // first row, EpilogueStore2), which must not change a bit either.
    options.threads = 3;
    options.min_parallel_bytes = 0;
    CpuBackend cpu(options);
    for (const RowNormArgs& a : alone) ASSERT_TRUE(cpu.RowNorm(a, 1).ok());
    ASSERT_TRUE(cpu.RowNormBatch(batch).ok());
    for (size_t k = 0; k < owned.size(); ++k) {
      EXPECT_EQ(owned[k].y_alone.bytes, owned[k].y_batch.bytes) << "segment " << k;
      EXPECT_EQ(owned[k].h_alone.bytes, owned[k].h_batch.bytes) << "segment " << k;
    }
  });
}

}  // namespace
}  // namespace normd::kernels
