// The CUDA launch plans the backend and the CUDA benchmark share (device_ops.h,
// launch_args.h): how a call is cut into launch units and which kernel takes them. Pure
// host code: these run without a device, in CI. Thread safety: plain tests.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/launch_args.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;

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

}  // namespace
}  // namespace normd::kernels
