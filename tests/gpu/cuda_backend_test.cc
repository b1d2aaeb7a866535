// The CUDA backend against the float64 reference: every row-wise op and option x dtype x
// hidden size (1, 3, 64, 128, 1000, 1024, 4096, 4097, 8192, 16384, 65536: rows held in
// registers and rows staged in shared memory) on random and docs/semantics.md's adversarial
// rows, row counts up to 65536, a ragged batch, and BatchNorm / GroupNorm /
// InstanceNorm in both layouts. Without a CUDA device (CI) every test skips, saying why.
#include "normd/kernels/cuda_backend.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/launch_args.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ExpectAllMatch;
using normd::testing::RandomValues;

// The launch plans the backend and the CUDA benchmark share (device_ops.h): pure host code,
// so these run without a device.
TEST(CudaPlanTest, WarpRowsGoEightToAUnitAndCoverEveryRowOnce) {
  std::vector<cuda::RowItem> items;
  cuda::PlanRowItems(3, 20, cuda::kWarpRowMaxCols, &items);
  ASSERT_EQ(items.size(), 3u);
  int64_t next = 0;
  for (const cuda::RowItem& it : items) {
    EXPECT_EQ(it.segment, 3);
    EXPECT_EQ(it.warp_rows, 1);
    EXPECT_EQ(it.first_row, next);
    next += it.count;
  }
  EXPECT_EQ(items.back().count, 4);
  EXPECT_EQ(next, 20);
}

TEST(CudaPlanTest, LongRowsTakeABlockEach) {
  std::vector<cuda::RowItem> items;
  cuda::PlanRowItems(0, 2, 65536, &items);
  cuda::PlanRowItems(1, 3, cuda::kWarpRowMaxCols + 1, &items);
  cuda::PlanRowItems(2, 0, 4096, &items);  // empty: nothing
  cuda::PlanRowItems(2, 5, 0, &items);
  ASSERT_EQ(items.size(), 5u);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i].warp_rows, 0);
    EXPECT_EQ(items[i].count, 1);
    EXPECT_EQ(items[i].segment, i < 2 ? 0 : 1);
    EXPECT_EQ(items[i].first_row, i < 2 ? static_cast<int64_t>(i) : static_cast<int64_t>(i - 2));
  }
}

// Rows are held in registers where they are whole 16-byte vectors, every tensor is 16-byte
// aligned, and a thread's share fits: at most 8 vectors (f32) or 4 (f16/bf16).
TEST(CudaPlanTest, RowsGoToRegistersWhereAlignedAndShortEnough) {
  cuda::RowSegment s{};
  auto regs = [&](int32_t dtype, int64_t cols, bool warp) {
    s.x_dtype = dtype;
    s.cols = cols;
    return cuda::RowRegisters(s, warp);
  };
  EXPECT_EQ(regs(cuda::kDevF32, 128, true), 1);
  EXPECT_EQ(regs(cuda::kDevF32, 129 * 4, true), 8);
  EXPECT_EQ(regs(cuda::kDevF32, 1024, true), 8);
  EXPECT_EQ(regs(cuda::kDevF32, 1028, true), 0);  // 257 vectors: 9 a lane
  EXPECT_EQ(regs(cuda::kDevF32, 8192, false), 8);
  EXPECT_EQ(regs(cuda::kDevF32, 4096, false), 4);
  EXPECT_EQ(regs(cuda::kDevBF16, 128, true), 1);  // 16 vectors: half the lanes idle
  EXPECT_EQ(regs(cuda::kDevBF16, 1024, true), 4);
  EXPECT_EQ(regs(cuda::kDevF16, 2048, true), 0);  // 8 a lane: more than 32 values
  EXPECT_EQ(regs(cuda::kDevF16, 4096, false), 2);
  EXPECT_EQ(regs(cuda::kDevF16, 8192, false), 4);
  EXPECT_EQ(regs(cuda::kDevF16, 8200, false), 0);
  EXPECT_EQ(regs(cuda::kDevF16, 4100, false), 0);  // not a whole number of vectors
  EXPECT_EQ(regs(cuda::kDevF32, 4098, false), 0);
  alignas(16) int storage[8];
  s.x_dtype = cuda::kDevF32;
  s.cols = 4096;
  s.h = reinterpret_cast<char*>(storage) + 4;  // any tensor off 16 bytes
  EXPECT_EQ(cuda::RowRegisters(s, false), 0);
}

// A ragged batch of mixed kinds, dtype pairs and register use: one launch per (vectors,
// kind, x dtype, y dtype), each over a contiguous run of the reordered items, every item in
// exactly one, the items of a launch in their planned order, each sized by its longest row.
TEST(CudaPlanTest, LaunchesGroupItemsByKindDtypePairAndRegisters) {
  std::vector<cuda::RowSegment> table(5);
  const int32_t x[] = {cuda::kDevBF16, cuda::kDevF32, cuda::kDevBF16, cuda::kDevBF16,
                       cuda::kDevF16};
  const int32_t y[] = {cuda::kDevBF16, cuda::kDevF32, cuda::kDevBF16, cuda::kDevF32, cuda::kDevF16};
  const int64_t rows[] = {9, 2, 3, 1, 2}, cols[] = {1024, 4096, 100, 8192, 65536};
  alignas(16) static char storage[64];
  std::vector<cuda::RowItem> items;
  for (int i = 0; i < 5; ++i) {
    table[i].x_dtype = x[i];
    table[i].y_dtype = y[i];
    table[i].rows = rows[i];
    table[i].cols = cols[i];
    cuda::PlanRowItems(i, rows[i], cols[i], &items);
  }
  table[1].y = storage + 8;  // segment 1 would fit in registers but for its y
  const std::vector<cuda::RowItem> planned = items;
  const std::vector<cuda::RowLaunch> launches = cuda::GroupRowItems(table.data(), &items);
  ASSERT_EQ(items.size(), planned.size());
  // Staged: block rows f32->f32 (segment 1: y off 16 bytes), f16->f16 (4: too long), warp
  // rows bf16->bf16 (2: 100 columns, not whole vectors); in registers, four vectors a thread:
  // block rows bf16->f32 (3), warp rows bf16->bf16 (0: 9 rows in two units).
  ASSERT_EQ(launches.size(), 5u);
  const int32_t want_vectors[] = {0, 0, 0, 4, 4}, want_warp[] = {0, 0, 1, 0, 1};
  const int32_t want_count[] = {2, 2, 1, 1, 2};
  const int32_t want_x[] = {cuda::kDevF32, cuda::kDevF16, cuda::kDevBF16, cuda::kDevBF16,
                            cuda::kDevBF16};
  const int32_t want_y[] = {cuda::kDevF32, cuda::kDevF16, cuda::kDevBF16, cuda::kDevF32,
                            cuda::kDevBF16};
  const int64_t want_cols[] = {4096, 65536, 100, 8192, 1024};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(launches[i].vectors, want_vectors[i]) << i;
    EXPECT_EQ(launches[i].warp_rows, want_warp[i]) << i;
    EXPECT_EQ(launches[i].x_dtype, want_x[i]) << i;
    EXPECT_EQ(launches[i].y_dtype, want_y[i]) << i;
    EXPECT_EQ(launches[i].count, want_count[i]) << i;
    EXPECT_EQ(launches[i].max_cols, want_cols[i]) << i;
  }
  int32_t next = 0;
  std::vector<int> seen(planned.size(), 0);
  for (const cuda::RowLaunch& l : launches) {
    EXPECT_EQ(l.first, next);
    next += l.count;
    int last_planned = -1;
    for (int32_t i = l.first; i < l.first + l.count; ++i) {
      const cuda::RowItem& it = items[i];
      EXPECT_EQ(it.warp_rows, l.warp_rows);
      EXPECT_EQ(table[it.segment].x_dtype, l.x_dtype);
      EXPECT_EQ(table[it.segment].y_dtype, l.y_dtype);
      EXPECT_EQ(cuda::RowRegisters(table[it.segment], it.warp_rows != 0), l.vectors);
      int at = -1;
      for (size_t p = 0; p < planned.size(); ++p) {
        if (planned[p].segment == it.segment && planned[p].first_row == it.first_row) at = p;
      }
      ASSERT_GE(at, 0);
      EXPECT_GT(at, last_planned);
      last_planned = at;
      ++seen[at];
    }
  }
  EXPECT_EQ(next, static_cast<int32_t>(items.size()));
  for (int n : seen) EXPECT_EQ(n, 1);
}

// The common call, one segment: one launch of every item in planned order.
TEST(CudaPlanTest, OneSegmentIsOneLaunch) {
  cuda::RowSegment s{};
  s.x_dtype = cuda::kDevBF16;
  s.y_dtype = cuda::kDevBF16;
  s.rows = 4096;
  s.cols = 4096;
  std::vector<cuda::RowItem> items;
  cuda::PlanRowItems(0, s.rows, s.cols, &items);
  const std::vector<cuda::RowLaunch> launches = cuda::GroupRowItems(&s, &items);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].first, 0);
  EXPECT_EQ(launches[0].count, 4096);
  EXPECT_EQ(launches[0].vectors, 2);
  EXPECT_EQ(launches[0].warp_rows, 0);
  EXPECT_EQ(launches[0].max_cols, 4096);
  for (int64_t r = 0; r < 4096; ++r) ASSERT_EQ(items[r].first_row, r);
}

TEST(CudaPlanTest, StatisticsSplitsAimAtTwoBlocksPerSm) {
  // BatchNorm on [32, 64, 56, 56], 132 SMs: 64 channels of 100352 elements, 5 chunks each.
  EXPECT_EQ(cuda::StatsSplits(64, 32 * 56 * 56, 132), 5);
  // Sets smaller than two chunks of 4096 stay whole; enough sets need no split.
  EXPECT_EQ(cuda::StatsSplits(1, 8191, 132), 1);
  EXPECT_EQ(cuda::StatsSplits(2048, 1 << 20, 132), 1);
  // One huge set: at most 1024 chunks.
  EXPECT_EQ(cuda::StatsSplits(1, int64_t{1} << 40, 600), 1024);
}

TEST(CudaPlanTest, ChannelsLastBatchNormSplitsCountTilesOfChannels) {
  cuda::ChannelArgs a{};
  a.n = 32, a.c = 64, a.s = 56 * 56;
  // Channels-first: 64 sets (channels) of 100352 elements, as StatsSplits.
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 5);
  // Channels-last: one block reads every channel of a range of rows, so the one tile of
  // 64 channels is the set, and 264 splits give two blocks an SM.
  a.channels_last = 1;
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 264);
  a.c = 600;  // three tiles of up to 256 channels
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 88);
  // GroupNorm: (sample, group) sets whatever the layout; 1024 sets need no split.
  a.c = 64, a.groups = 32;
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 1);
  a.channels_last = 0;
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 1);
}

TEST(CudaPlanTest, ApplyParametersArePerChannelOrPerSampleAndChannel) {
  cuda::ChannelArgs a{};
  a.n = 8, a.c = 64, a.s = 49;
  EXPECT_EQ(cuda::ChannelParamCount(a), 64);  // BatchNorm: the channel's
  a.groups = 8;
  EXPECT_EQ(cuda::ChannelParamCount(a), 8 * 64);  // GroupNorm: its (sample, group)'s
}

TEST(CudaPlanTest, RowSegmentCarriesTheParametersDtypesAndTheOffset) {
  Buffer x = Buffer::Of(DType::kBF16, std::vector<float>(8, 1.0f));
  Buffer w = Buffer::Of(DType::kF32, std::vector<float>(4, 1.0f));
  Buffer b = Buffer::Of(DType::kF16, std::vector<float>(4, 1.0f));
  RowNormArgs a;
  a.kind = RowNormKind::kRms;
  a.rows = 2;
  a.cols = 4;
  a.x = x.view();
  a.weight = w.view();
  a.weight_offset = 1.0;
  cuda::RowSegment s = cuda::SegmentOf(a);
  EXPECT_EQ(s.x_dtype, cuda::kDevBF16);
  EXPECT_EQ(s.w_dtype, cuda::kDevF32);
  EXPECT_EQ(s.w_offset, 1.0f);   // Gemma's 1 + w, added in the kernel
  a.kind = RowNormKind::kLayer;  // the offset is RMSNorm's alone
  a.bias = b.view();
  s = cuda::SegmentOf(a);
  EXPECT_EQ(s.w_offset, 0.0f);
  EXPECT_EQ(s.b_dtype, cuda::kDevF16);
}

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
      for (int64_t cols : {1, 3, 64, 128, 1000, 1024, 4096, 4097, 8192, 16384, 65536}) {
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
  // 4096: held in registers; 4097: staged.
  for (const int64_t cols : {int64_t{4096}, int64_t{4097}}) {
    for (const RowConfig& cfg : Configs()) {
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
        const std::vector<std::pair<std::string, std::vector<float>>> cases = {
            {"mean 1e4 var 1", RandomValues(rng, cols, 1e4f, 1.0f)},
            {"1e6 spread 1e-3", RandomValues(rng, cols, 1e6f, 1e-3f)},
            {"constant", std::vector<float>(cols, 3.25f)},
            {"|x| >= 256", RandomValues(rng, cols, 0.0f, 3000.0f)},
            {"tiny", RandomValues(rng, cols, 0.0f, 1e-3f)},
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

TEST_F(CudaTest, ChannelOpsMatchReferenceInBothLayouts) {
  std::mt19937_64 rng(14);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
      const int64_t n = 4, c = 64, s = 56 * 56;
      Buffer x = Buffer::Of(t, RandomValues(rng, n * c * s, 1.0f, 3.0f));
      Buffer w = Buffer::Of(DType::kF32, RandomValues(rng, c, 1.0f, 0.3f));
      Buffer b = Buffer::Of(DType::kF32, RandomValues(rng, c));
      Buffer rm = Buffer::Of(DType::kF32, RandomValues(rng, c));
      Buffer rv = Buffer::Of(DType::kF32, std::vector<float>(c, 2.0f));
      const std::string where =
          absl::StrCat(DTypeName(t), layout == Layout::kChannelsLast ? " CL" : " CF");
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
        ASSERT_TRUE(backend_->BatchNorm(a).ok());
        const reference::BatchNormResult ref = reference::BatchNorm(a);
        ExpectAllMatch(y, ref.y, "batch_norm y " + where, ref.magnitude);
        if (training) {
          ExpectAllMatch(bm, ref.mean, "batch mean " + where);
          ExpectAllMatch(bv, ref.var, "batch var " + where);
          ExpectAllMatch(rmo, ref.running_mean, "running mean " + where);
          ExpectAllMatch(rvo, ref.running_var, "running var " + where);
        }
      }
      for (int64_t groups : {int64_t{1}, int64_t{32}, c}) {  // c: InstanceNorm
        Buffer y(t, n * c * s);
        GroupNormArgs g;
        g.n = n;
        g.c = c;
        g.s = s;
        g.groups = groups;
        g.layout = layout;
        g.x = x.view();
        g.weight = w.view();
        g.bias = b.view();
        g.y = y.view_mut();
        ASSERT_TRUE(backend_->GroupNorm(g).ok());
        const reference::GroupNormResult ref = reference::GroupNorm(g);
        ExpectAllMatch(y, ref.y, absl::StrCat("group_norm G=", groups, " ", where), ref.magnitude);
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
