// Row ops with their weight and bias in the input's dtype (f16/bf16, as a half-precision
// model's are): the CPU backend reads them in place where the output fits in cache
// (ParamsInPlace, kernels/cpu/row_plan.h), Gemma's offset added there, and widens them once
// a call otherwise. Either way they must give the bits that the same values given in fp32
// give, on every compiled SIMD target, for one row and for rows taken in pairs, whole
// vectors and partial ones.
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

struct ParamsCase {
  std::string name;
  RowNormKind kind;
  bool weight, bias;
  ResidualPlacement residual = ResidualPlacement::kNone;
  bool cast_before_weight = false;
  double partial_fraction = 1, weight_offset = 0;
};

std::vector<ParamsCase> Cases() {
  using K = RowNormKind;
  using R = ResidualPlacement;
  return {
      {"layer_affine", K::kLayer, true, true},
      {"layer_weight", K::kLayer, true, false},
      {"layer_bias", K::kLayer, false, true},
      {"layer_add_then_norm", K::kLayer, true, true, R::kAddThenNorm},
      {"layer_norm_then_add", K::kLayer, true, true, R::kNormThenAdd},
      {"rms_weight", K::kRms, true, false},
      {"rms_cast_before_weight", K::kRms, true, false, R::kNone, true},
      {"rms_hf_norm_then_add", K::kRms, true, false, R::kNormThenAdd, true},
      {"rms_add_then_norm", K::kRms, true, false, R::kAddThenNorm},
      {"rms_partial", K::kRms, true, false, R::kNone, false, 0.3},
      // Gemma's 1 + w: formed in registers, or widened with the offset from 4 rows.
      {"rms_offset", K::kRms, true, false, R::kNone, false, 1, 1.0},
      {"rms_offset_cast", K::kRms, true, false, R::kNone, true, 1, -0.5},
      {"rms_offset_add_then_norm", K::kRms, true, false, R::kAddThenNorm, false, 1, 1.0},
      {"rms_offset_norm_then_add", K::kRms, true, false, R::kNormThenAdd, false, 1, 1.0},
  };
}

class RowNormParamsTest : public ::testing::TestWithParam<DType> {};

TEST_P(RowNormParamsTest, InputDtypeParamsGiveTheBitsOfF32Params) {
  const DType t = GetParam();
  ForEachTarget([&] {
    std::mt19937_64 rng(11);
    // 1 row; rows in pairs (LayerNorm with both, EpilogueStore2) and an odd one left; a
    // partial last vector; just past the short rows' 512 columns.
    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {1, 4096}, {5, 1000}, {2, 4097}, {3, 513}, {1, 8191}};
    for (const ParamsCase& c : Cases()) {
      for (const auto& [rows, cols] : shapes) {
        const int64_t n = rows * cols;
        const Buffer x = Buffer::Of(t, RandomValues(rng, n, 0.5f, 2.0f));
        const Buffer skip = Buffer::Of(t, RandomValues(rng, n));
        // The values rounded to t first, so that the fp32 copies hold the same numbers.
        const Buffer w_typed = Buffer::Of(t, RandomValues(rng, cols, 1.0f, 0.5f));
        const Buffer b_typed = Buffer::Of(t, RandomValues(rng, cols));
        Buffer w_f32(DType::kF32, cols), b_f32(DType::kF32, cols);
        for (int64_t i = 0; i < cols; ++i) {
          w_f32.view_mut().set(i, w_typed.at(i));
          b_f32.view_mut().set(i, b_typed.at(i));
        }
        RowNormArgs a;
        a.kind = c.kind;
        a.rows = rows;
        a.cols = cols;
        a.x = x.view();
        a.eps = 1e-5;
        a.weight_offset = c.weight_offset;
        a.partial_fraction = c.partial_fraction;
        a.cast_before_weight = c.cast_before_weight;
        a.residual = c.residual;
        if (c.residual != ResidualPlacement::kNone) a.skip = skip.view();
        const std::string what = absl::StrCat(c.name, " ", DTypeName(t), " ", rows, "x", cols);
        // Outputs in cache (parameters read in place) and streamed (widened once).
        CpuBackendOptions in_cache, streamed;
        in_cache.stream_bytes = int64_t{1} << 60;
        streamed.stream_bytes = 0;
        for (const CpuBackendOptions& options : {in_cache, streamed}) {
          const std::string how = options.stream_bytes == 0 ? " streamed" : " in cache";
          Buffer y_typed(t, n), y_f32(t, n), h_typed(t, n), h_f32(t, n);
          for (bool typed : {true, false}) {
            RowNormArgs call = a;
            if (c.weight) call.weight = typed ? w_typed.view() : w_f32.view();
            if (c.bias) call.bias = typed ? b_typed.view() : b_f32.view();
            call.y = (typed ? y_typed : y_f32).view_mut();
            if (c.residual == ResidualPlacement::kAddThenNorm) {
              call.h = (typed ? h_typed : h_f32).view_mut();
            }
            ASSERT_TRUE(CpuBackend(options).RowNorm(call, 1).ok()) << what;
            if (typed) {
              const reference::RowNormResult ref = reference::RowNorm(call);
              ExpectAllMatch(y_typed, ref.y, what + how + " y", ref.magnitude, ref.y_alt);
            }
          }
          EXPECT_EQ(y_typed.bytes, y_f32.bytes) << what << how;
          EXPECT_EQ(h_typed.bytes, h_f32.bytes) << what << how;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(HalfDtypes, RowNormParamsTest,
                         ::testing::Values(DType::kF16, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace normd::kernels
