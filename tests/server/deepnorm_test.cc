#include "server/deepnorm.h"

#include <cmath>

#include "gtest/gtest.h"

namespace normd::server {
namespace {

TEST(DeepNormTest, EncoderOnly) {
  auto c = ComputeDeepNorm(Architecture::kEncoder, 6, 0);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(*c->encoder_alpha, std::pow(12.0, 0.25));
  EXPECT_DOUBLE_EQ(*c->encoder_beta, std::pow(48.0, -0.25));
  EXPECT_FALSE(c->decoder_alpha.has_value());
}

TEST(DeepNormTest, DecoderOnly) {
  auto c = ComputeDeepNorm(Architecture::kDecoder, 0, 18);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(*c->decoder_alpha, 2.4494897, 1e-6);  // (36)^(1/4)
  EXPECT_NEAR(*c->decoder_beta, 0.2886751, 1e-6);   // (144)^(-1/4)
  EXPECT_FALSE(c->encoder_alpha.has_value());
}

TEST(DeepNormTest, EncoderDecoderUsesTheOneSixteenthExponent) {
  auto c = ComputeDeepNorm(Architecture::kEncoderDecoder, 12, 12);
  ASSERT_TRUE(c.ok());
  const double nm = std::pow(12.0, 4) * 12.0;
  EXPECT_DOUBLE_EQ(*c->encoder_alpha, 0.81 * std::pow(nm, 1.0 / 16));
  EXPECT_DOUBLE_EQ(*c->encoder_beta, 0.87 * std::pow(nm, -1.0 / 16));
  EXPECT_DOUBLE_EQ(*c->decoder_alpha, std::pow(36.0, 0.25));
  EXPECT_DOUBLE_EQ(*c->decoder_beta, std::pow(144.0, -0.25));
}

TEST(DeepNormTest, RejectsNonPositiveLayerCounts) {
  EXPECT_EQ(ComputeDeepNorm(Architecture::kEncoder, 0, 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeDeepNorm(Architecture::kEncoderDecoder, 4, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace normd::server
