// Where a row op's buffers lie: its output at every offset from a cache line (streamed
// against plain stores) and an fp32 weight and bias off one (against aligned ones) must not
// change a bit, on every compiled target. A server's tensors lie wherever its transport
// parsed them.
#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/row_plan.h"
#include "normd/kernels/cpu_backend.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ForEachTarget;
using normd::testing::RandomValues;

// Large outputs go out with non-temporal stores, which need aligned addresses: the kernel
// writes a head up to the first aligned element and streams from there. An output at any
// offset (a protobuf string's data is 16-byte aligned, not 64) must give the same bytes as
// plain stores, on every target (SSE4's four-lane f16/bf16 stores once faulted), from
// every input dtype; so must a residual add's h, streamed (f16/bf16) where its row is
// vector-aligned. (An aligned load of the row buffer at the head's odd offset once crashed
// normd on a single 128 MiB request.)
TEST(RowNormStreamTest, StreamedOutputAtEveryOffsetMatchesPlainStores) {
  ForEachTarget([] {
    std::mt19937_64 rng(7);
    // Six rows: large f16/bf16 rows without a residual take their statistics four at a time
    // (a group and two single rows) at 1000 columns, one by one at 4100, and at 1024 and
    // 2000 (f32 rows too) the next row's sums in a row's epilogue loop (fused_rows.cc; at
    // 2000, not a whole number of its blocks, the two passes from that loop), where plain
    // stores take them one by one. 1000 columns (not a multiple of any vector width) start
    // each row at another alignment; 1024 start every row where the first does. From 4096
    // columns a large f16/bf16 row with a residual forms h again in its epilogue, where
    // plain stores read the fp32 row buffer. RMSNorm's cast_before_weight takes the
    // one-loop pass too.
    const int64_t rows = 6;
    for (const int64_t cols : {1000, 1024, 2000, 4100}) {
      // Large f16/bf16 rows are also read in place (RowSource), small ones from the fp32
      // buffer: the same bytes either way.
      for (const auto& io : {std::pair{DType::kF32, DType::kF32},
                             {DType::kF32, DType::kF16},
                             {DType::kF32, DType::kBF16},
                             {DType::kF16, DType::kF16},
                             {DType::kBF16, DType::kBF16},
                             {DType::kBF16, DType::kF32}}) {
        // Plain variables: a lambda below captures them (clang 14 cannot capture bindings).
        const DType in_t = io.first, out_t = io.second;
        // RMSNorm with Hugging Face's cast too (f16/bf16 in: a no-op for f32), and with partial
        // statistics: at 1024 columns a quarter is whole blocks of the one-loop pass (which
        // then sums part of the next row), 0.3 is not (the pass declines every row).
        struct Kind {
          RowNormKind kind;
          bool cast;
          double partial;
        };
        for (const Kind& kc : {Kind{RowNormKind::kLayer, false, 1},
                               {RowNormKind::kRms, false, 1},
                               {RowNormKind::kRms, true, 1},
                               {RowNormKind::kRms, false, 0.25},
                               {RowNormKind::kRms, true, 0.25},
                               {RowNormKind::kRms, false, 0.3}}) {
          const RowNormKind kind = kc.kind;
          const bool cast = kc.cast;
          const double partial = kc.partial;
          if (partial < 1 && cols != 1024) continue;  // the test's time
          if (cast && in_t == DType::kF32) continue;
          for (bool affine : {false, true}) {
            // With a residual added first, h streams too where its row is aligned (f16/bf16);
            // one added last takes the one-loop pass too, its skip read beside x.
            for (ResidualPlacement residual :
                 {ResidualPlacement::kNone, ResidualPlacement::kAddThenNorm,
                  ResidualPlacement::kNormThenAdd}) {
              Buffer x = Buffer::Of(in_t, RandomValues(rng, rows * cols, 0.5f, 2));
              Buffer skip = Buffer::Of(in_t, RandomValues(rng, rows * cols));
              Buffer w = Buffer::Of(DType::kF32, RandomValues(rng, cols, 1, 0.1f));
              Buffer b = Buffer::Of(DType::kF32, RandomValues(rng, cols));
              const size_t esize = ElementSize(out_t), hsize = ElementSize(in_t);
              for (size_t offset = 0; offset < 64 / esize; ++offset) {
                std::vector<unsigned char> plain((rows * cols + 64) * esize),
                    streamed(plain.size());
                std::vector<unsigned char> plain_h((rows * cols + 64) * hsize),
                    streamed_h(plain_h.size());
                auto args = [&](std::vector<unsigned char>& into, std::vector<unsigned char>& h) {
                  RowNormArgs a;
                  a.kind = kind;
                  a.rows = rows;
                  a.cols = cols;
                  a.x = x.view();
                  if (affine) {
                    a.weight = w.view();
                    a.bias = b.view();
                  }
                  a.cast_before_weight = cast;
                  a.partial_fraction = partial;
                  a.residual = residual;
                  if (residual != ResidualPlacement::kNone) a.skip = skip.view();
                  if (residual == ResidualPlacement::kAddThenNorm) {
                    a.h = {in_t, h.data() + (offset % (64 / hsize)) * hsize, rows * cols};
                  }
                  a.y = {out_t, into.data() + offset * esize, rows * cols};
                  return a;
                };
                CpuBackendOptions never, always;
                never.stream_bytes = int64_t{1} << 60;
                always.stream_bytes = 0;
                ASSERT_TRUE(CpuBackend(never).RowNorm(args(plain, plain_h)).ok());
                ASSERT_TRUE(CpuBackend(always).RowNorm(args(streamed, streamed_h)).ok());
                ASSERT_EQ(plain, streamed)
                    << static_cast<int>(out_t) << " offset " << offset << " cols " << cols
                    << " residual " << static_cast<int>(residual) << " cast " << cast << " partial "
                    << partial;
                ASSERT_EQ(plain_h, streamed_h)
                    << static_cast<int>(out_t) << " h offset " << offset << " cols " << cols;
              }
            }
          }
        }
      }
    }
  });
}

// Long rows (from kFusedLongRowBytes, row_plan.h: 64 KiB) take the one-loop pass where their
// output streams, the two passes where it does not: the same bits, at an aligned output and at
// one that needs a head, with and without a weight and bias, Gemma's offset, Hugging Face's
// cast and a residual added last, and f32 rows with a residual added first.
TEST(RowNormStreamTest, LongRowsInOneLoopGiveTheTwoPassesBits) {
  ForEachTarget([] {
    std::mt19937_64 rng(13);
    const int64_t rows = 4;
    // And f32 rows of 4096 columns, which take the loop with a residual added first too
    // (OneLoopAddFits; without one, LayerNorm's with a weight and a bias keep the two passes).
    for (const auto& tc : {std::pair{DType::kF32, int64_t{16384}},
                           {DType::kBF16, int64_t{32768}},
                           {DType::kF16, int64_t{32768}},
                           {DType::kF32, int64_t{4096}}}) {
      const DType t = tc.first;
      const int64_t cols = tc.second;
      Buffer x = Buffer::Of(t, RandomValues(rng, rows * cols, 0.5f, 2));
      Buffer skip = Buffer::Of(t, RandomValues(rng, rows * cols));
      Buffer w = Buffer::Of(DType::kF32, RandomValues(rng, cols, 1, 0.1f));
      Buffer b = Buffer::Of(DType::kF32, RandomValues(rng, cols));
      struct Variant {
        RowNormKind kind;
        bool weight, bias, cast;
        double offset;
      };
      for (const Variant& v : {Variant{RowNormKind::kLayer, true, true, false, 0},
                               Variant{RowNormKind::kLayer, false, false, false, 0},
                               Variant{RowNormKind::kRms, true, false, false, 0},
                               Variant{RowNormKind::kRms, true, false, false, 1},
                               Variant{RowNormKind::kRms, true, false, true, 0},
                               Variant{RowNormKind::kL2, false, false, false, 0}}) {
        if (v.cast && t == DType::kF32) continue;
        // A residual added first (f32 LayerNorm with a weight and a bias, RMSNorm with a
        // weight, returning h: the fused adds' loop), returning h (compared too) and not.
        for (const auto& rh : {std::pair{ResidualPlacement::kNone, false},
                               {ResidualPlacement::kNormThenAdd, false},
                               {ResidualPlacement::kAddThenNorm, true},
                               {ResidualPlacement::kAddThenNorm, false}}) {
          const ResidualPlacement residual = rh.first;
          const bool with_h = rh.second;
          const size_t esize = ElementSize(t);
          for (size_t offset : {size_t{0}, size_t{3}}) {
            auto run = [&](int64_t stream_bytes) {
              std::vector<unsigned char> out((rows * cols + 64) * esize), h(out.size());
              // From a 64-byte boundary (a vector's on every target), then `offset` elements on.
              const auto at = [&](std::vector<unsigned char>& v) {
                const uintptr_t base = reinterpret_cast<uintptr_t>(v.data());
                return reinterpret_cast<unsigned char*>((base + 63) / 64 * 64) + offset * esize;
              };
              RowNormArgs a;
              a.kind = v.kind;
              a.rows = rows;
              a.cols = cols;
              a.x = x.view();
              if (v.weight) a.weight = w.view();
              if (v.bias) a.bias = b.view();
              a.weight_offset = v.offset;
              a.cast_before_weight = v.cast;
              a.residual = residual;
              if (residual != ResidualPlacement::kNone) a.skip = skip.view();
              // h aligned (streamed from the loop) at an aligned y, not at the other.
              if (with_h) a.h = {t, at(h), rows * cols};
              a.y = {t, at(out), rows * cols};
              CpuBackendOptions options;
              options.stream_bytes = stream_bytes;
              EXPECT_TRUE(CpuBackend(options).RowNorm(a).ok());
              // The output and h as written, wherever each buffer began.
              const size_t bytes = static_cast<size_t>(rows * cols) * esize;
              std::vector<unsigned char> written(at(out), at(out) + bytes);
              if (with_h) written.insert(written.end(), at(h), at(h) + bytes);
              return written;
            };
            ASSERT_EQ(run(int64_t{1} << 60), run(0))
                << DTypeName(t) << " kind " << static_cast<int>(v.kind) << " weight " << v.weight
                << " bias " << v.bias << " cast " << v.cast << " offset " << v.offset
                << " residual " << static_cast<int>(residual) << " h " << with_h << " y offset "
                << offset;
          }
        }
      }
    }
  });
}

// LayerNorm's long rows take the loop by the L2 they would hold (LongAffineLoopFits): at
// 65536 columns, f32 (1 MiB held) and bf16 (768 KiB) on the Intel VM's 2 MiB, neither on the
// Zen 4 VM's 1 MiB, bf16 at 32768 columns (384 KiB) there; where the size is unknown, all.
TEST(RowNormStreamTest, LongLayerNormRowsTakeTheLoopByTheirL2) {
  constexpr int64_t kMiB = 1 << 20;
  EXPECT_TRUE(cpu::LongAffineLoopFits(DType::kF32, 65536, 2 * kMiB));
  EXPECT_TRUE(cpu::LongAffineLoopFits(DType::kBF16, 65536, 2 * kMiB));
  EXPECT_FALSE(cpu::LongAffineLoopFits(DType::kF32, 65536, kMiB));
  EXPECT_FALSE(cpu::LongAffineLoopFits(DType::kBF16, 65536, kMiB));
  EXPECT_TRUE(cpu::LongAffineLoopFits(DType::kBF16, 32768, kMiB));
  EXPECT_TRUE(cpu::LongAffineLoopFits(DType::kF32, 65536, 0));
}

// An fp32 weight and bias where a request's parsed bytes put them (any multiple of 4 bytes
// past a 64-byte boundary): the backend uses them in place (row_norm.cc, F32Param), and the
// kernels' loads and the two-row epilogue must give the bits of aligned parameters, for
// every input dtype and target, for one row, a few and many.
TEST(RowNormParamTest, MisalignedF32ParametersGiveTheBitsOfAlignedOnes) {
  ForEachTarget([] {
    std::mt19937_64 rng(11);
    for (const int64_t cols : {1000, 4096}) {
      for (const int64_t rows : {1, 8, 70}) {
        for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
          for (RowNormKind kind : {RowNormKind::kLayer, RowNormKind::kRms}) {
            const int64_t n = rows * cols;
            Buffer x = Buffer::Of(t, RandomValues(rng, n, 0.5f, 2));
            const std::vector<float> w = RandomValues(rng, cols, 1, 0.1f);
            const std::vector<float> b = RandomValues(rng, cols);
            // Aligned: std::vector<unsigned char>'s storage is 16-byte aligned, so place the
            // parameters by hand on a 64-byte boundary and at each offset from it.
            std::vector<unsigned char> wmem((cols + 32) * 4), bmem((cols + 32) * 4);
            auto place = [&](std::vector<unsigned char>& mem, const std::vector<float>& v,
                             size_t offset) {
              const uintptr_t base = reinterpret_cast<uintptr_t>(mem.data());
              float* at = reinterpret_cast<float*>((base + 63) / 64 * 64 + offset);
              std::copy(v.begin(), v.end(), at);
              return ConstTensor{DType::kF32, at, cols};
            };
            auto run = [&](size_t offset) {
              Buffer y(t, n);
              RowNormArgs a;
              a.kind = kind;
              a.rows = rows;
              a.cols = cols;
              a.x = x.view();
              a.weight = place(wmem, w, offset);
              if (kind == RowNormKind::kLayer) a.bias = place(bmem, b, (offset * 3) % 64);
              a.eps = 1e-5;
              a.y = y.view_mut();
              EXPECT_TRUE(CpuBackend().RowNorm(a).ok());
              return y.bytes;
            };
            const std::vector<unsigned char> aligned = run(0);
            for (size_t offset = 4; offset < 64; offset += 12) {
              ASSERT_EQ(aligned, run(offset)) << "offset " << offset << " rows " << rows << " cols "
                                              << cols << " dtype " << static_cast<int>(t);
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace normd::kernels
