// The CUDA launch plans the backend and the CUDA benchmark share (device_ops.h,
// launch_args.h): how a call is cut into launch units and which kernel takes them. Pure
// host code: these run without a device, in CI. Thread safety: plain tests.
#include <cstdint>
#include <random>
#include <utility>
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
  EXPECT_EQ(regs(cuda::kDevF32, 3000, false), 4);  // 750 vectors: 3 a thread, held in 4
  EXPECT_EQ(regs(cuda::kDevBF16, 128, true), 1);   // 16 vectors: half the lanes idle
  EXPECT_EQ(regs(cuda::kDevBF16, 1024, true), 4);
  EXPECT_EQ(regs(cuda::kDevF16, 2048, true), 0);   // 8 a lane: more than 32 values
  EXPECT_EQ(regs(cuda::kDevF16, 4096, false), 2);  // a few rows: a whole block
  EXPECT_EQ(regs(cuda::kDevF16, 8192, false), 4);  // a whole block
  EXPECT_EQ(regs(cuda::kDevF16, 8200, false), 0);
  EXPECT_EQ(regs(cuda::kDevF16, 4100, false), 0);  // not a whole number of vectors
  EXPECT_EQ(regs(cuda::kDevF32, 4098, false), 0);
  alignas(16) int storage[8];
  s.x_dtype = cuda::kDevF32;
  s.cols = 4096;
  s.h = reinterpret_cast<char*>(storage) + 4;  // any tensor off 16 bytes
  EXPECT_EQ(cuda::RowRegisters(s, false), 0);
}

// f16/bf16 block rows held in registers take half a block where 128 threads hold the row
// (twice the rows an SM) and the segment has rows for it, a whole block where not; f32
// rows, staged rows and warp rows a whole block.
TEST(CudaPlanTest, ManyShortBlockRowsTakeHalfABlock) {
  cuda::RowSegment s{};
  s.rows = 4096;
  auto threads = [&](int32_t dtype, int64_t cols, bool warp) {
    s.x_dtype = dtype;
    s.cols = cols;
    return cuda::RowLaunchThreads(s, warp);
  };
  EXPECT_EQ(threads(cuda::kDevBF16, 4096, false), 128);  // 512 vectors: 4 a thread
  EXPECT_EQ(threads(cuda::kDevBF16, 4104, false), 256);  // 513: 5 would be too many
  EXPECT_EQ(threads(cuda::kDevF32, 4096, false), 256);   // f32: slower in half a block
  EXPECT_EQ(threads(cuda::kDevF16, 4100, false), 256);   // staged (not whole vectors)
  EXPECT_EQ(threads(cuda::kDevF16, 1024, true), 256);    // warp rows: eight warps
  s.rows = cuda::kHalfBlockRows - 1;                     // a call of few rows
  EXPECT_EQ(threads(cuda::kDevBF16, 4096, false), 256);
  EXPECT_EQ(cuda::RowRegisters(s, false), 2);
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
  const std::vector<cuda::RowLaunch> launches =
      cuda::GroupRowItems(table.data(), &items, /*max_cluster=*/1);
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
    // 8192 bf16 columns need a whole block of four vectors a thread; warp rows and staged
    // rows are launched eight warps a block.
    EXPECT_EQ(launches[i].threads, 256) << i;
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
  const std::vector<cuda::RowLaunch> launches = cuda::GroupRowItems(&s, &items, /*max_cluster=*/1);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].first, 0);
  EXPECT_EQ(launches[0].count, 4096);
  EXPECT_EQ(launches[0].vectors, 4);
  EXPECT_EQ(launches[0].threads, 128);
  EXPECT_EQ(launches[0].warp_rows, 0);
  EXPECT_EQ(launches[0].max_cols, 4096);
  for (int64_t r = 0; r < 4096; ++r) ASSERT_EQ(items[r].first_row, r);
}

// Aligned rows too long for one block's registers are held by the fewest blocks of a
// cluster (of up to max_cluster, 8 on sm_90, 1 where clusters cannot run) that hold 32
// values a thread or fewer; longer rows, unaligned rows and warp rows are not.
TEST(CudaPlanTest, LongAlignedRowsTakeTheFewestBlocksOfACluster) {
  cuda::RowSegment s{};
  s.rows = 3;
  auto blocks = [&](int32_t dtype, int64_t cols, int32_t most) {
    s.x_dtype = dtype;
    s.cols = cols;
    return cuda::RowClusterBlocks(s, most);
  };
  EXPECT_EQ(blocks(cuda::kDevF32, 8192, 8), 1);    // 2048 vectors: one block, 8 a thread
  EXPECT_EQ(blocks(cuda::kDevF32, 8196, 8), 2);    // 2049
  EXPECT_EQ(blocks(cuda::kDevF32, 65536, 8), 8);   // 16384: 8 a thread in 8 blocks
  EXPECT_EQ(blocks(cuda::kDevF32, 65540, 8), 1);   // 16385: 9 blocks, too many
  EXPECT_EQ(blocks(cuda::kDevF32, 65536, 1), 1);   // no clusters on this device
  EXPECT_EQ(blocks(cuda::kDevBF16, 8192, 8), 1);   // 1024 vectors: one block, 4 a thread
  EXPECT_EQ(blocks(cuda::kDevBF16, 20000, 8), 3);  // 2500
  EXPECT_EQ(blocks(cuda::kDevF16, 65536, 8), 8);   // 8192
  EXPECT_EQ(blocks(cuda::kDevF16, 65536, 4), 1);
  auto plan = [&](int32_t dtype, int64_t cols) {
    s.x_dtype = dtype;
    s.cols = cols;
    return std::pair{cuda::RowRegisters(s, false, 8), cuda::RowLaunchCluster(s, false, 8)};
  };
  EXPECT_EQ(plan(cuda::kDevF32, 65536), std::pair(8, 8));
  EXPECT_EQ(plan(cuda::kDevF32, 16384), std::pair(8, 2));
  EXPECT_EQ(plan(cuda::kDevBF16, 20000), std::pair(4, 3));  // 834 vectors a block: 4 a thread
  EXPECT_EQ(plan(cuda::kDevF32, 65544), std::pair(0, 1));   // staged
  EXPECT_EQ(plan(cuda::kDevF16, 65540), std::pair(0, 1));   // not whole vectors: staged
  EXPECT_EQ(plan(cuda::kDevF32, 4096), std::pair(4, 1));    // one block
  EXPECT_EQ(cuda::RowRegisters(s, false, 1), 4);
  s.cols = 65536;
  EXPECT_EQ(cuda::RowRegisters(s, false, 1), 0);  // staged without clusters
  EXPECT_EQ(cuda::RowLaunchCluster(s, true, 8), 1);
  alignas(16) static char storage[32];
  s.skip = storage + 4;  // any tensor off 16 bytes: staged
  EXPECT_EQ(cuda::RowLaunchCluster(s, false, 8), 1);
}

// Cluster rows are their own launch, of whole blocks (256 threads), beside the others.
TEST(CudaPlanTest, ClusterRowsAreTheirOwnLaunch) {
  std::vector<cuda::RowSegment> table(2);
  table[0].x_dtype = table[0].y_dtype = cuda::kDevF16;
  table[0].rows = 3;
  table[0].cols = 65536;
  table[1].x_dtype = table[1].y_dtype = cuda::kDevF32;
  table[1].rows = 2;
  table[1].cols = 4096;
  std::vector<cuda::RowItem> items;
  for (int32_t i = 0; i < 2; ++i) cuda::PlanRowItems(i, table[i].rows, table[i].cols, &items);
  const std::vector<cuda::RowLaunch> launches = cuda::GroupRowItems(table.data(), &items, 8);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].cluster, 1);  // the one-block rows first
  EXPECT_EQ(launches[0].x_dtype, cuda::kDevF32);
  EXPECT_EQ(launches[0].count, 2);
  EXPECT_EQ(launches[1].cluster, 8);
  EXPECT_EQ(launches[1].vectors, 4);
  EXPECT_EQ(launches[1].threads, 256);
  EXPECT_EQ(launches[1].first, 2);
  EXPECT_EQ(launches[1].count, 3);
  for (int32_t i = 2; i < 5; ++i) EXPECT_EQ(items[i].segment, 0);
  // Without clusters the long rows are staged: still their own launch.
  items.clear();
  for (int32_t i = 0; i < 2; ++i) cuda::PlanRowItems(i, table[i].rows, table[i].cols, &items);
  const std::vector<cuda::RowLaunch> staged = cuda::GroupRowItems(table.data(), &items, 1);
  ASSERT_EQ(staged.size(), 2u);
  EXPECT_EQ(staged[0].vectors, 0);
  EXPECT_EQ(staged[0].cluster, 1);
  EXPECT_EQ(staged[0].x_dtype, cuda::kDevF16);
}

TEST(CudaPlanTest, StatisticsSplitsFillOneWaveOfThreeBlocksPerSm) {
  // BatchNorm on [32, 64, 56, 56], 132 SMs: 64 channels of 100352 elements, 6 chunks each
  // (384 blocks; 7 would make 448, more than the 396 of one wave).
  EXPECT_EQ(cuda::StatsSplits(64, 32 * 56 * 56, 132), 6);
  // Sets smaller than two chunks of 4096 stay whole; enough sets need no split.
  EXPECT_EQ(cuda::StatsSplits(1, 8191, 132), 1);
  EXPECT_EQ(cuda::StatsSplits(2048, 1 << 20, 132), 1);
  // One huge set: at most 1024 chunks.
  EXPECT_EQ(cuda::StatsSplits(1, int64_t{1} << 40, 600), 1024);
}

TEST(CudaPlanTest, ChannelStatisticsSplitsCountTheBlocksOfTheirKernel) {
  cuda::ChannelArgs a{};
  a.n = 32, a.c = 64, a.s = 56 * 56;  // f32
  // Channels-first: 64 sets (channels) of 100352 elements, as StatsSplits.
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 6);
  // Channels-last: one block reads every channel of a range of rows, so the one tile of
  // 64 channels is the unit, and 396 splits make one wave.
  a.channels_last = 1;
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 396);
  a.c = 3000;  // three tiles of up to 1024 f32 channels (256 threads of four)
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 132);
  // GroupNorm channels-last: a tile of the sample's 64 channels a block, 32 samples, 12
  // splits of their 3136 rows.
  a.c = 64, a.groups = 32;
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 12);
  // Channels-first: 1024 (sample, group) sets need no split.
  a.channels_last = 0;
  EXPECT_EQ(cuda::ChannelStatsSplits(a, 132), 1);
}

TEST(CudaPlanTest, ChannelsLastStatisticsTakeVectorsAndWholeGroups) {
  cuda::ChannelArgs a{};
  a.n = 4, a.s = 49, a.channels_last = 1;
  auto plan = [&](int32_t dtype, int64_t c, int64_t groups) {
    a.x_dtype = dtype, a.c = c, a.groups = groups;
    const cuda::ChannelsLastPlan p = cuda::PlanChannelsLast(a);
    return std::pair<int, int64_t>(p.vec, p.width);
  };
  using P = std::pair<int, int64_t>;
  EXPECT_EQ(plan(cuda::kDevF16, 64, 0), P(8, 64));  // a 16-byte vector a thread
  EXPECT_EQ(plan(cuda::kDevF32, 64, 0), P(4, 64));
  EXPECT_EQ(plan(cuda::kDevF16, 12, 0), P(1, 12));      // 12 is no multiple of 8: one a thread
  EXPECT_EQ(plan(cuda::kDevF32, 4096, 0), P(4, 1024));  // tiles of 256 threads x 4
  // GroupNorm: tiles of whole groups. 128 channels a group: 16 groups in 2048.
  EXPECT_EQ(plan(cuda::kDevBF16, 4096, 32), P(8, 2048));
  // 375 channels a group, eight to a vector: no tile of whole groups and whole vectors
  // fits (3000 > 2048), nor of whole groups alone (375 > 256).
  EXPECT_EQ(plan(cuda::kDevF16, 3000, 8), P(0, 0));
  EXPECT_EQ(plan(cuda::kDevF16, 64, 64), P(8, 64));  // InstanceNorm: a channel a group
  a.n = 70000;                                       // more samples than a grid dimension
  EXPECT_EQ(plan(cuda::kDevF16, 64, 64), P(0, 0));
  a.n = 4, a.channels_last = 0;
  EXPECT_EQ(plan(cuda::kDevF16, 64, 0), P(0, 0));
}

TEST(CudaPlanTest, OnePositionASampleReadsAsChannelsLast) {
  Buffer x = Buffer::Of(DType::kF32, std::vector<float>(8 * 16, 1.0f));
  BatchNormArgs a;
  a.n = 8, a.c = 16, a.s = 1;
  a.layout = Layout::kChannelsFirst;
  a.x = x.view();
  EXPECT_EQ(cuda::ChannelArgsOf(a).channels_last, 1);
  a.s = 2;
  EXPECT_EQ(cuda::ChannelArgsOf(a).channels_last, 0);
}

TEST(CudaPlanTest, FastDivMatchesDivision) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> divisors = {
      1, 2, 3, 7, 49, 64, 3136, 65535, 65536, 1000003, (int64_t{1} << 31) - 1, int64_t{1} << 31};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<int64_t>(rng() % 100000));
  for (int i = 0; i < 50; ++i) divisors.push_back(1 + static_cast<int64_t>(rng() % (1u << 31)));
  const int64_t largest = (int64_t{1} << 31) - 1;
  for (int64_t d : divisors) {
    const cuda::FastDiv f(d, largest);
    ASSERT_FALSE(f.wide) << d;
    std::vector<int64_t> ns = {
        0, 1, d - 1, d, d + 1, largest, largest - 1, largest / d * d, largest / d * d - 1};
    for (int i = 0; i < 2000; ++i) ns.push_back(static_cast<int64_t>(rng() % (largest + 1)));
    for (int64_t k = 1; k < 64; ++k) {
      if (k * d <= largest) ns.push_back(k * d - 1);
      if (k * d <= largest) ns.push_back(k * d);
    }
    for (int64_t n : ns) {
      if (n < 0 || n > largest) continue;
      ASSERT_EQ(f.Div(n), n / d) << n << " / " << d;
    }
  }
  // Beyond 32 bits it divides in 64.
  const cuda::FastDiv wide(3, int64_t{1} << 31);
  EXPECT_TRUE(wide.wide);
  EXPECT_EQ(wide.Div((int64_t{1} << 40) + 2), ((int64_t{1} << 40) + 2) / 3);
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
