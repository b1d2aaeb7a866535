// The CUDA backend against the float64 reference: every row-wise op and option x dtype x
// hidden size (1, 3, 64, 128, 1000, 1024, 4096, 4097, 8192, 16384, 20000, 65536, 65544:
// rows held in the registers of a warp, a block or a cluster of blocks, and rows staged in
// shared memory) on random and docs/semantics.md's adversarial rows, row counts up to 65536, a
// ragged batch, and BatchNorm / GroupNorm / InstanceNorm in both layouts. Without a CUDA device
// (CI) every test skips, saying why.
#include "normd/kernels/cuda_backend.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ExpectAllMatch;
using normd::testing::RandomValues;

class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<Backend>> b = MakeCudaBackend();
    if (b.ok()) {
      backend_ = b->release();
    } else {
      why_ = std::string(b.status().message());
    }
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << "no CUDA backend: " << why_;
  }
  static inline Backend* backend_ = nullptr;
  static inline std::string why_;
};

struct RowConfig {
  std::string name;
  RowNormKind kind;
  bool weight = false, bias = false;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  double weight_offset = 0, partial_fraction = 1;
  bool cast_before_weight = false;
  ResidualPlacement residual = ResidualPlacement::kNone;
  double alpha = 1;
};

std::vector<RowConfig> Configs() {
  using K = RowNormKind;
  using R = ResidualPlacement;
  return {
      {"layer", K::kLayer},
      {"layer_affine", K::kLayer, true, true},
      {"layer_add_to_std", K::kLayer, true, true, EpsPlacement::kOutsideSqrt},
      {"layer_add_then_norm", K::kLayer, true, true, {}, 0, 1, false, R::kAddThenNorm, 0.5},
      {"layer_norm_then_add", K::kLayer, true, true, {}, 0, 1, false, R::kNormThenAdd, 2.0},
      {"rms", K::kRms},
      {"rms_weight", K::kRms, true},
      {"rms_gemma", K::kRms, true, false, {}, 1.0},
      {"rms_partial", K::kRms, true, false, {}, 0, 0.25},
      {"rms_cast_before_weight", K::kRms, true, false, {}, 0, 1, true},
      {"rms_add_then_norm", K::kRms, true, false, {}, 0, 1, false, R::kAddThenNorm, 1.7},
      {"l2", K::kL2},
  };
}

// y_dtype: the output's, when it differs from x's.
void CheckRows(Backend& b, const RowConfig& cfg, DType dtype, int64_t rows, int64_t cols,
               const std::vector<float>& xv, std::mt19937_64& rng, const std::string& what,
               std::optional<DType> y_dtype = std::nullopt) {
  Buffer x = Buffer::Of(dtype, xv);
  Buffer skip = Buffer::Of(dtype, RandomValues(rng, rows * cols));
  Buffer weight = Buffer::Of(dtype, RandomValues(rng, cols, 1.0f, 0.5f));
  Buffer bias = Buffer::Of(dtype, RandomValues(rng, cols));
  Buffer y(y_dtype.value_or(dtype), rows * cols), h(dtype, rows * cols);
  RowNormArgs a;
  a.kind = cfg.kind;
  a.rows = rows;
  a.cols = cols;
  a.x = x.view();
  if (cfg.weight) a.weight = weight.view();
  if (cfg.bias) a.bias = bias.view();
  a.eps = cfg.kind == RowNormKind::kLayer
              ? kDefaultLayerNormEps
              : (cfg.kind == RowNormKind::kRms ? kDefaultRmsNormEps : kDefaultL2NormEps);
  a.eps_placement = cfg.eps_placement;
  a.weight_offset = cfg.weight_offset;
  a.partial_fraction = cfg.partial_fraction;
  a.cast_before_weight = cfg.cast_before_weight;
  a.residual = cfg.residual;
  a.alpha = cfg.alpha;
  if (cfg.residual != ResidualPlacement::kNone) a.skip = skip.view();
  a.y = y.view_mut();
  if (cfg.residual == ResidualPlacement::kAddThenNorm) a.h = h.view_mut();
  ASSERT_TRUE(b.RowNorm(a).ok()) << what;
  const reference::RowNormResult ref = reference::RowNorm(a);
  ExpectAllMatch(y, ref.y, what + " y", ref.magnitude, ref.y_alt);
  if (a.h.present()) ExpectAllMatch(h, ref.h, what + " h");
}

TEST_F(CudaTest, RowOpsMatchReferenceOnEveryHiddenSize) {
  std::mt19937_64 rng(11);
  for (const RowConfig& cfg : Configs()) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      // 16384, 20000 and 65536: clusters of 2-8 blocks (on sm_90); 65544 f32: 9 blocks'
      // registers, staged.
      for (int64_t cols :
           {1, 3, 64, 128, 1000, 1024, 4096, 4097, 8192, 16384, 20000, 65536, 65544}) {
        const int64_t rows = cols >= 16384 ? 3 : 17;
        CheckRows(*backend_, cfg, t, rows, cols, RandomValues(rng, rows * cols, 0.5f, 2.0f), rng,
                  absl::StrCat(cfg.name, " ", DTypeName(t), " ", rows, "x", cols));
      }
    }
  }
}

// An output dtype other than the input's, on rows held in registers by a warp (1024) and by
// a block (4096), and on staged rows (4097): stores of 8, 16 and 32 bytes a vector.
TEST_F(CudaTest, RowOpsWriteEveryOutputDtype) {
  std::mt19937_64 rng(16);
  for (const RowConfig& cfg : Configs()) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (DType yt : {DType::kF32, DType::kF16, DType::kBF16}) {
        if (yt == t) continue;
        for (int64_t cols : {1024, 4096, 4097}) {
          CheckRows(*backend_, cfg, t, 5, cols, RandomValues(rng, 5 * cols, 0.5f, 2.0f), rng,
                    absl::StrCat(cfg.name, " ", DTypeName(t), "->", DTypeName(yt), " 5x", cols),
                    yt);
        }
      }
    }
  }
}

TEST_F(CudaTest, RowOpsOnManyRows) {
  std::mt19937_64 rng(12);
  for (const RowConfig& cfg : Configs()) {
    CheckRows(*backend_, cfg, DType::kBF16, 65536, 64, RandomValues(rng, 65536 * 64), rng,
              cfg.name + " 65536x64");
  }
}

TEST_F(CudaTest, RowOpsOnAdversarialRows) {
  std::mt19937_64 rng(13);
  // 4096: held in a block's registers; 4097: staged; 65536: held by a cluster of blocks.
  for (const int64_t cols : {int64_t{4096}, int64_t{4097}, int64_t{65536}}) {
    for (const RowConfig& cfg : Configs()) {
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
        const std::vector<std::pair<std::string, std::vector<float>>> cases = {
            {"mean 1e4 var 1", RandomValues(rng, cols, 1e4f, 1.0f)},
            {"1e6 spread 1e-3", RandomValues(rng, cols, 1e6f, 1e-3f)},
            {"constant", std::vector<float>(cols, 3.25f)},
            {"|x| >= 256", RandomValues(rng, cols, 0.0f, 3000.0f)},
            {"tiny", RandomValues(rng, cols, 0.0f, 1e-3f)},
            {"outputs near zero", normd::testing::NearMeanRow(rng, t, cols)},
        };
        for (const auto& [name, values] : cases) {
          if (cfg.kind == RowNormKind::kL2 && name == "constant") continue;
          CheckRows(*backend_, cfg, t, 1, cols, values, rng,
                    absl::StrCat(cfg.name, " ", DTypeName(t), " ", cols, " ", name));
        }
      }
    }
  }
}

// One [n, c, s] input of dtype t in `layout`, parameters of param_t: BatchNorm (training,
// with every statistic output, and inference) and GroupNorm with each of `groups`, against
// the reference.
struct ChannelShape {
  int64_t n, c, s;
  std::vector<int64_t> groups;
};
void CheckChannelOps(Backend& backend, DType t, DType param_t, Layout layout,
                     const ChannelShape& shape, float mean, float scale, std::mt19937_64& rng) {
  const auto [n, c, s, groups] = shape;
  Buffer x = Buffer::Of(t, RandomValues(rng, n * c * s, mean, scale));
  Buffer w = Buffer::Of(param_t, RandomValues(rng, c, 1.0f, 0.3f));
  Buffer b = Buffer::Of(param_t, RandomValues(rng, c));
  Buffer rm = Buffer::Of(DType::kF32, RandomValues(rng, c));
  Buffer rv = Buffer::Of(DType::kF32, std::vector<float>(c, 2.0f));
  const std::string where =
      absl::StrCat(DTypeName(t), " ", n, "x", c, "x", s, " params ", DTypeName(param_t),
                   layout == Layout::kChannelsLast ? " CL" : " CF");
  for (bool training : {true, false}) {
    Buffer y(t, n * c * s), bm(DType::kF32, c), bv(DType::kF32, c), rmo(DType::kF32, c),
        rvo(DType::kF32, c);
    BatchNormArgs a;
    a.n = n;
    a.c = c;
    a.s = s;
    a.layout = layout;
    a.x = x.view();
    a.weight = w.view();
    a.bias = b.view();
    a.running_mean = rm.view();
    a.running_var = rv.view();
    a.training = training;
    a.y = y.view_mut();
    if (training) {
      a.batch_mean = bm.view_mut();
      a.batch_var = bv.view_mut();
      a.running_mean_out = rmo.view_mut();
      a.running_var_out = rvo.view_mut();
    }
    ASSERT_TRUE(backend.BatchNorm(a).ok()) << where;
    const reference::BatchNormResult ref = reference::BatchNorm(a);
    ExpectAllMatch(y, ref.y, "batch_norm y " + where, ref.magnitude);
    if (training) {
      ExpectAllMatch(bm, ref.mean, "batch mean " + where);
      ExpectAllMatch(bv, ref.var, "batch var " + where);
      ExpectAllMatch(rmo, ref.running_mean, "running mean " + where);
      ExpectAllMatch(rvo, ref.running_var, "running var " + where);
    }
  }
  for (int64_t g_count : groups) {
    Buffer y(t, n * c * s);
    GroupNormArgs g;
    g.n = n;
    g.c = c;
    g.s = s;
    g.groups = g_count;
    g.layout = layout;
    g.x = x.view();
    g.weight = w.view();
    g.bias = b.view();
    g.y = y.view_mut();
    ASSERT_TRUE(backend.GroupNorm(g).ok()) << where;
    const reference::GroupNormResult ref = reference::GroupNorm(g);
    ExpectAllMatch(y, ref.y, absl::StrCat("group_norm G=", g_count, " ", where), ref.magnitude);
  }
}

TEST_F(CudaTest, ChannelOpsMatchReferenceInBothLayouts) {
  std::mt19937_64 rng(14);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
      // groups 64: InstanceNorm.
      CheckChannelOps(*backend_, t, DType::kF32, layout, {4, 64, 56 * 56, {1, 32, 64}}, 1.0f, 3.0f,
                      rng);
    }
  }
}

// Shapes that take every kernel's other paths: channels not a multiple of a vector (one
// channel a thread), planes shorter than a chunk and not 16-byte aligned, one position a
// sample (read as channels-last), more channels than a tile (2056: two tiles of f16
// channels; 257 channels a group fit no tile, so the set's runs are read instead; 8 a
// group fit), a single sample; parameters in the input's dtype, data far from 0.
TEST_F(CudaTest, ChannelOpsMatchReferenceOnOddShapes) {
  std::mt19937_64 rng(15);
  const std::vector<ChannelShape> shapes = {
      {2, 3, 5, {1, 3}},      {3, 12, 7, {3, 4, 12}}, {5, 24, 1, {1, 6, 24}},
      {2, 16, 4099, {2, 16}}, {2, 2056, 9, {8, 257}}, {1, 8, 3000, {1, 8}},
  };
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
      for (const ChannelShape& shape : shapes) {
        CheckChannelOps(*backend_, t, t, layout, shape, 40.0f, 2.0f, rng);
      }
    }
  }
}

TEST_F(CudaTest, RaggedBatchIsBitIdenticalToSeparateCalls) {
  std::mt19937_64 rng(15);
  std::vector<Buffer> xs, ys_alone, ys_batch, ws;
  std::vector<RowNormArgs> alone, batch;
  const std::vector<RowConfig> configs = Configs();
  for (size_t i = 0; i < configs.size(); ++i) {
    const int64_t cols = std::vector<int64_t>{3, 64, 128, 4097, 20000}[i % 5];
    const int64_t rows = 1 + static_cast<int64_t>(i) * 3;
    xs.push_back(Buffer::Of(DType::kBF16, RandomValues(rng, rows * cols)));
    ws.push_back(Buffer::Of(DType::kBF16, RandomValues(rng, cols, 1.0f, 0.5f)));
    ys_alone.emplace_back(DType::kBF16, rows * cols);
    ys_batch.emplace_back(DType::kBF16, rows * cols);
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    RowNormArgs a;
    a.kind = configs[i].kind;
    a.rows = xs[i].numel / ws[i].numel;
    a.cols = ws[i].numel;
    a.x = xs[i].view();
    if (configs[i].weight) a.weight = ws[i].view();
    a.eps = 1e-5;
    RowNormArgs b = a;
    a.y = ys_alone[i].view_mut();
    b.y = ys_batch[i].view_mut();
    alone.push_back(a);
    batch.push_back(b);
  }
  for (const auto& a : alone) ASSERT_TRUE(backend_->RowNorm(a).ok());
  ASSERT_TRUE(backend_->RowNormBatch(batch).ok());
  for (size_t i = 0; i < configs.size(); ++i) EXPECT_EQ(ys_alone[i].bytes, ys_batch[i].bytes) << i;
}

}  // namespace
}  // namespace normd::kernels
