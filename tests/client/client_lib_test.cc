// The client library's pieces that need no server: tensor helpers and their f32 <->
// f16/bf16 rounding (to nearest even), and normbench's workload (every op builds a valid
// request that the float64 reference accepts; --mix parsing and its weighted choice).
#include <cmath>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "normd/host_tensor.h"
#include "normd/load/verify.h"
#include "normd/load/workload.h"

namespace normd {
namespace {

TEST(TensorHelpersTest, RoundToNearestEven) {
  // bf16 keeps 8 bits of mantissa: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6 (even).
  EXPECT_EQ(FloatFromBF16(BF16FromFloat(1 + 0x1p-8f)), 1.0f);
  EXPECT_EQ(FloatFromBF16(BF16FromFloat(1 + 3 * 0x1p-8f)), 1 + 0x1p-6f);
  EXPECT_EQ(FloatFromF16(F16FromFloat(1 + 0x1p-11f)), 1.0f);
  EXPECT_EQ(FloatFromF16(F16FromFloat(1 + 3 * 0x1p-11f)), 1 + 0x1p-9f);
  EXPECT_TRUE(std::isinf(FloatFromF16(F16FromFloat(70000.0f))));  // F16 overflow
  EXPECT_TRUE(std::isnan(FloatFromBF16(BF16FromFloat(NAN))));
  const std::vector<float> in = {0.1f, -2.5f, 65504.0f};
  const std::vector<uint16_t> h = ToF16(in);
  std::vector<float> back(3);
  FromF16(h, back);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_NEAR(back[0], 0.1f, 1e-4);
  const std::vector<uint16_t> b = ToBF16(in);
  FromBF16(b, back);
  EXPECT_EQ(back[1], -2.5f);
}

TEST(TensorHelpersTest, FromSpansAndVectorsAndCopyTo) {
  const float raw[6] = {1, 2, 3, 4, 5, 6};
  HostTensor t = HostTensor::FromFloats(DType::kF32, {2, 3}, std::span<const float>(raw, 6));
  EXPECT_EQ(t.numel(), 6);
  std::vector<float> out(6);
  ASSERT_TRUE(t.CopyTo(out));
  EXPECT_EQ(out[5], 6.0f);
  std::vector<float> short_buffer(5);
  EXPECT_FALSE(t.CopyTo(short_buffer));
  HostTensor v = HostTensor::FromVector(DType::kBF16, std::vector<float>{1.5f, -3});
  EXPECT_EQ(v.shape, std::vector<int64_t>{2});
  EXPECT_EQ(v.ToFloats()[1], -3.0f);
  const std::vector<uint16_t> bits = {BF16FromFloat(2.0f)};
  EXPECT_EQ(HostTensor::FromBits(DType::kBF16, {1}, bits).ToFloats()[0], 2.0f);
}

CliFlags Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "normbench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  CliFlags f(Workload::Flags());
  EXPECT_TRUE(f.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  return f;
}

TEST(WorkloadTest, EveryOpBuildsARequestTheReferenceAccepts) {
  const std::vector<std::vector<std::string>> kinds = {
      {"--op", "layer-norm", "--weight", "--bias", "--residual", "--return-sum"},
      {"--op", "layer-norm", "--shape", "2x8x16", "--normalized-ndim", "2"},
      {"--op", "rms-norm", "--weight", "--weight-offset", "1", "--dtype", "bf16"},
      {"--op", "rms-norm", "--partial-fraction", "0.5", "--cast-before-weight", "--weight"},
      {"--op", "rms-norm", "--residual", "--placement", "norm-then-add", "--alpha", "2"},
      {"--op", "l2-norm", "--dtype", "f16"},
      {"--op", "qk-norm", "--kind", "layer", "--weight", "--shape", "4x64"},
      {"--op", "batch-norm", "--shape", "4x8x5", "--weight", "--bias"},
      {"--op", "batch-norm", "--shape", "4x5x8", "--training", "--running-stats", "--layout",
       "channels-last"},
      {"--op", "group-norm", "--shape", "2x8x4x4", "--groups", "4"},
      {"--op", "instance-norm", "--shape", "2x8x9", "--use-running-stats"},
  };
  for (const auto& k : kinds) {
    absl::StatusOr<Workload> w = Workload::FromFlags(Parse(k), 3);
    ASSERT_TRUE(w.ok()) << k[1] << ": " << w.status();
    ASSERT_TRUE(w->ComputeReferences().ok()) << w->items()[0].label;
    EXPECT_FALSE(w->items()[0].reference->tensors.empty()) << w->items()[0].label;
  }
  EXPECT_FALSE(Workload::FromFlags(Parse({"--op", "nope"}), 1).ok());
  EXPECT_FALSE(
      Workload::FromFlags(Parse({"--op", "group-norm", "--shape", "2x6x4", "--groups", "4"}), 1)
          .ok());
  EXPECT_FALSE(Workload::FromFlags(Parse({"--shape", "0x4"}), 1).ok());
}

TEST(WorkloadTest, SameSeedSameInputs) {
  auto a = Workload::FromFlags(Parse({"--op", "rms-norm", "--weight"}), 5);
  auto b = Workload::FromFlags(Parse({"--op", "rms-norm", "--weight"}), 5);
  auto c = Workload::FromFlags(Parse({"--op", "rms-norm", "--weight"}), 6);
  EXPECT_EQ(a->items()[0].request.SerializeAsString(), b->items()[0].request.SerializeAsString());
  EXPECT_NE(a->items()[0].request.SerializeAsString(), c->items()[0].request.SerializeAsString());
}

TEST(WorkloadTest, MixFollowsItsWeights) {
  absl::StatusOr<Workload> w = Workload::FromMix(
      "# weight op shape dtype flags\n"
      "3 rms-norm 1x64 bf16 --weight\n"
      "\n"
      "1 layer-norm 2x32 f32 --bias   # trailing comment\n",
      9);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->items().size(), 2u);
  std::map<const WorkItem*, int> picks;
  for (uint64_t n = 0; n < 40000; ++n) ++picks[&w->Pick(n)];
  EXPECT_NEAR(picks[&w->items()[0]] / 40000.0, 0.75, 0.02);
  EXPECT_EQ(&w->Pick(123), &w->Pick(123));  // deterministic
  EXPECT_FALSE(Workload::FromMix("x rms-norm 1x4 f32\n", 1).ok());
  EXPECT_FALSE(Workload::FromMix("1 rms-norm 1x4\n", 1).ok());
  EXPECT_FALSE(Workload::FromMix("1 rms-norm 1x4 f32 --bogus\n", 1).ok());
  EXPECT_FALSE(Workload::FromMix("# nothing\n", 1).ok());
}

TEST(VerifyTest, CountsWrongAndMissingOutputs) {
  absl::StatusOr<Workload> w = Workload::FromFlags(Parse({"--op", "l2-norm", "--shape", "2x4"}), 1);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->ComputeReferences().ok());
  const Reference& ref = *w->items()[0].reference;
  v1::NormalizeResponse r;
  *r.mutable_output() = w->items()[0].request.input();  // the input, not its L2 norm
  EXPECT_GT(Mismatches(ref, r), 0);
  // The right answer, rounded to f32 from the reference, passes.
  std::vector<float> right;
  for (double v : ref.tensors[0].second) right.push_back(static_cast<float>(v));
  r.mutable_output()->set_data(
      std::string(reinterpret_cast<const char*>(right.data()), right.size() * 4));
  EXPECT_EQ(Mismatches(ref, r), 0);
  EXPECT_EQ(Mismatches(ref, v1::NormalizeResponse()), 8);  // missing output: every element
}

}  // namespace
}  // namespace normd
