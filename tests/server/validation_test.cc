// Every malformed request gets its code and a message naming the field with the
// expected and actual values, before any compute.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "server/request_builder.h"
#include "tests/server/request_factory.h"

namespace normd::server {
namespace {

using normd::testing::BatchNormRequest;
using normd::testing::FillTensor;
using normd::testing::GroupNormRequest;
using normd::testing::InstanceNormRequest;
using normd::testing::LayerNormRequest;
using normd::testing::QkNormRequest;
using normd::testing::RmsNormRequest;
using ::testing::HasSubstr;

struct BadCase {
  std::string name;
  std::function<v1::NormalizeRequest()> make;
  absl::StatusCode code;
  std::vector<std::string> message_parts;  // each must appear in the message
};

std::vector<BadCase> Cases() {
  using C = absl::StatusCode;
  const C kInvalid = C::kInvalidArgument;
  return {
      {"no_op",
       [] {
         auto r = LayerNormRequest();
         r.clear_layer_norm();
         return r;
       },
       kInvalid,
       {"op:", "got none"}},
      {"no_input",
       [] {
         auto r = LayerNormRequest();
         r.clear_input();
         return r;
       },
       kInvalid,
       {"input: required"}},
      {"byte_length",
       [] {
         auto r = LayerNormRequest();
         r.mutable_input()->mutable_data()->pop_back();
         return r;
       },
       kInvalid,
       {"input.data", "expected 32 bytes", "F32 [2, 4]", "got 31"}},
      {"unknown_dtype",
       [] {
         auto r = LayerNormRequest();
         r.mutable_input()->set_dtype(static_cast<v1::DataType>(9));
         return r;
       },
       kInvalid,
       {"input.dtype", "expected DATA_TYPE_F32, DATA_TYPE_F16 or DATA_TYPE_BF16",
        "got an unknown value (9)"}},
      {"unspecified_dtype",
       [] {
         auto r = LayerNormRequest();
         r.mutable_input()->set_dtype(v1::DATA_TYPE_UNSPECIFIED);
         return r;
       },
       kInvalid,
       {"input.dtype", "DATA_TYPE_UNSPECIFIED"}},
      {"rank_0",
       [] {
         auto r = LayerNormRequest();
         r.mutable_input()->clear_shape();
         return r;
       },
       kInvalid,
       {"input.shape", "expected rank 1 to 8", "got rank 0"}},
      {"rank_9",
       [] {
         auto r = RmsNormRequest();
         FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, {1, 1, 1, 1, 1, 1, 1, 1, 4});
         return r;
       },
       kInvalid,
       {"input.shape", "got rank 9"}},
      {"negative_dim",
       [] {
         auto r = LayerNormRequest();
         r.mutable_input()->set_shape(0, -2);
         return r;
       },
       kInvalid,
       {"input.shape[0]", "expected >= 0", "got -2"}},
      {"overflow",
       [] {
         auto r = RmsNormRequest();
         auto* s = r.mutable_input()->mutable_shape();
         s->Set(0, int64_t{1} << 40);
         s->Set(1, int64_t{1} << 40);
         return r;
       },
       kInvalid,
       {"input.shape", "overflows int64"}},
      {"too_many_elements",
       [] {
         auto r = RmsNormRequest();
         r.mutable_input()->set_shape(0, int64_t{1} << 40);
         return r;
       },
       kInvalid,
       {"input.shape", "expected at most"}},
      {"huge_dim_of_an_empty_tensor",
       [] {
         auto r = RmsNormRequest();
         r.mutable_input()->set_shape(0, 0);
         r.mutable_input()->set_shape(1, int64_t{1} << 40);
         return r;
       },
       kInvalid,
       {"input.shape[1]", "expected at most", "got 1099511627776"}},
      {"weight_shape",
       [] {
         auto r = LayerNormRequest({2, 5});
         FillTensor(r.mutable_layer_norm()->mutable_weight(), v1::DATA_TYPE_F32, {4});
         return r;
       },
       kInvalid,
       {"layer_norm.weight",
        "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size [2, "
        "5]"}},
      {"param_dtype",
       [] {
         auto r = RmsNormRequest();
         FillTensor(r.mutable_input(), v1::DATA_TYPE_BF16, {2, 4});
         FillTensor(r.mutable_rms_norm()->mutable_weight(), v1::DATA_TYPE_F16, {4});
         return r;
       },
       kInvalid,
       {"rms_norm.weight.dtype", "expected F32 or BF16", "got F16"}},
      {"normalized_ndim",
       [] {
         auto r = LayerNormRequest();
         r.mutable_layer_norm()->set_normalized_ndim(3);
         return r;
       },
       kInvalid,
       {"layer_norm.normalized_ndim", "expected 1 to 2", "got 3"}},
      {"nan_eps",
       [] {
         auto r = LayerNormRequest();
         r.mutable_layer_norm()->set_eps(std::nan(""));
         return r;
       },
       kInvalid,
       {"layer_norm.eps", "finite value >= 0", "got nan"}},
      {"negative_eps",
       [] {
         auto r = RmsNormRequest();
         r.mutable_rms_norm()->set_eps(-1e-6);
         return r;
       },
       kInvalid,
       {"rms_norm.eps", "got -1e-06"}},
      {"inf_eps",
       [] {
         auto r = RmsNormRequest();
         r.mutable_rms_norm()->set_eps(INFINITY);
         return r;
       },
       kInvalid,
       {"rms_norm.eps", "got inf"}},
      {"partial_zero",
       [] {
         auto r = RmsNormRequest();
         r.mutable_rms_norm()->set_partial_fraction(0);
         return r;
       },
       kInvalid,
       {"rms_norm.partial_fraction", "(0, 1]", "got 0"}},
      {"partial_above_one",
       [] {
         auto r = RmsNormRequest();
         r.mutable_rms_norm()->set_partial_fraction(1.5);
         return r;
       },
       kInvalid,
       {"rms_norm.partial_fraction", "got 1.5"}},
      {"offset_without_weight",
       [] {
         auto r = RmsNormRequest();
         r.mutable_rms_norm()->clear_weight();
         r.mutable_rms_norm()->set_weight_offset(1);
         return r;
       },
       kInvalid,
       {"rms_norm.weight", "weight_offset"}},
      {"groups_zero",
       [] { return GroupNormRequest(0); },
       kInvalid,
       {"group_norm.num_groups", "num_groups=0"}},
      {"groups_not_dividing",
       [] { return GroupNormRequest(3); },
       kInvalid,
       {"Expected number of channels in input to be divisible by num_groups, but got input of "
        "shape [2, 8, 4] and num_groups=3"}},
      {"bn_one_value",
       [] {
         auto r = BatchNormRequest(true, {1, 4});
         return r;
       },
       kInvalid,
       {"Expected more than 1 value per channel when training, got input size [1, 4]"}},
      {"bn_rank_1",
       [] {
         auto r = BatchNormRequest(true);
         FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, {4});
         return r;
       },
       kInvalid,
       {"input.shape", "rank >= 2", "got [4]"}},
      {"bn_missing_running",
       [] {
         auto r = BatchNormRequest(false);
         r.mutable_batch_norm()->clear_running_var();
         return r;
       },
       kInvalid,
       {"batch_norm.running_var", "required when training = false"}},
      {"bn_running_shape",
       [] {
         auto r = BatchNormRequest(false);
         FillTensor(r.mutable_batch_norm()->mutable_running_mean(), v1::DATA_TYPE_F32, {3});
         return r;
       },
       kInvalid,
       {"batch_norm.running_mean.shape", "expected [4]", "got [3]"}},
      {"bn_momentum_nan",
       [] {
         auto r = BatchNormRequest(true);
         r.mutable_batch_norm()->set_momentum(std::nan(""));
         return r;
       },
       kInvalid,
       {"batch_norm.momentum", "finite"}},
      {"in_one_spatial",
       [] {
         return InstanceNormRequest({2, 3, 1});
       },
       kInvalid,
       {"Expected more than 1 spatial element when training, got input size [2, 3, 1]"}},
      {"in_missing_running",
       [] {
         auto r = InstanceNormRequest();
         r.mutable_instance_norm()->set_use_running_stats(true);
         return r;
       },
       kInvalid,
       {"instance_norm.running_mean", "required with use_running_stats"}},
      {"skip_shape",
       [] {
         auto r = RmsNormRequest();
         FillTensor(r.mutable_rms_norm()->mutable_residual()->mutable_skip(), v1::DATA_TYPE_F32,
                    {2, 5});
         return r;
       },
       kInvalid,
       {"rms_norm.residual.skip.shape", "expected [2, 4]", "got [2, 5]"}},
      {"skip_dtype",
       [] {
         auto r = LayerNormRequest();
         FillTensor(r.mutable_layer_norm()->mutable_residual()->mutable_skip(), v1::DATA_TYPE_F16,
                    {2, 4});
         return r;
       },
       kInvalid,
       {"layer_norm.residual.skip.dtype", "expected F32", "got F16"}},
      {"alpha_inf",
       [] {
         auto r = RmsNormRequest();
         auto* res = r.mutable_rms_norm()->mutable_residual();
         FillTensor(res->mutable_skip(), v1::DATA_TYPE_F32, {2, 4});
         res->set_alpha(INFINITY);
         return r;
       },
       kInvalid,
       {"rms_norm.residual.alpha", "finite"}},
      {"qk_q_weight",
       [] {
         auto r = QkNormRequest(8, 8);
         FillTensor(r.mutable_qk_norm()->mutable_q_weight(), v1::DATA_TYPE_F32, {4});
         return r;
       },
       kInvalid,
       {"qk_norm.q_weight.shape", "expected [8]", "head_dim of q", "got [4]"}},
      {"qk_k_weight",
       [] {
         auto r = QkNormRequest(8, 16);
         FillTensor(r.mutable_qk_norm()->mutable_k_weight(), v1::DATA_TYPE_F32, {8});
         return r;
       },
       kInvalid,
       {"qk_norm.k_weight.shape", "expected [16]", "got [8]"}},
      {"qk_with_input",
       [] {
         auto r = QkNormRequest();
         FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, {2});
         return r;
       },
       kInvalid,
       {"input: expected unset for qk_norm"}},
      {"output_dtype",
       [] {
         auto r = RmsNormRequest();
         r.set_output_dtype(static_cast<v1::DataType>(7));
         return r;
       },
       kInvalid,
       {"output_dtype", "got an unknown value (7)"}},
      {"return_sum_norm_then_add",
       [] {
         auto r = RmsNormRequest();
         auto* res = r.mutable_rms_norm()->mutable_residual();
         FillTensor(res->mutable_skip(), v1::DATA_TYPE_F32, {2, 4});
         res->set_placement(v1::RESIDUAL_PLACEMENT_NORM_THEN_ADD);
         res->set_return_sum(true);
         return r;
       },
       kInvalid,
       {"rms_norm.residual.return_sum", "RESIDUAL_PLACEMENT_NORM_THEN_ADD"}},
      {"unknown_eps_placement",
       [] {
         auto r = LayerNormRequest();
         r.mutable_layer_norm()->set_eps_placement(static_cast<v1::EpsPlacement>(5));
         return r;
       },
       kInvalid,
       {"layer_norm.eps_placement", "got an unknown value (5)"}},
      {"unknown_layout",
       [] {
         auto r = GroupNormRequest(2);
         r.mutable_group_norm()->set_layout(static_cast<v1::Layout>(4));
         return r;
       },
       kInvalid,
       {"group_norm.layout", "got an unknown value (4)"}},
      {"unknown_backend",
       [] {
         auto r = RmsNormRequest();
         r.set_backend(static_cast<v1::Backend>(9));
         return r;
       },
       kInvalid,
       {"backend", "got an unknown value (9)"}},
  };
}

class ValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidationTest, RejectsWithCodeAndFieldMessage) {
  const BadCase& c = GetParam();
  const v1::NormalizeRequest request = c.make();
  v1::NormalizeResponse response;
  Limits limits;
  limits.max_elements = int64_t{1} << 27;
  absl::StatusOr<Job> job = BuildJob(request, limits, &response);
  ASSERT_FALSE(job.ok()) << c.name;
  EXPECT_EQ(job.status().code(), c.code) << job.status();
  // The field travels as a google.rpc.BadRequest payload, not only in the message: the
  // message reads "FIELD: description", and the payload names the same FIELD.
  const std::string message(job.status().message());
  const std::string field = ErrorField(job.status());  // the client library's reader
  EXPECT_FALSE(field.empty()) << "no field violation in " << job.status();
  EXPECT_EQ(message.substr(0, message.find(": ")), field) << job.status();
  for (const std::string& part : c.message_parts) {
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(BadRequests, ValidationTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ValidationTest, ValidRequestsBuildJobsWithShapedOutputs) {
  Limits limits;
  for (const v1::NormalizeRequest& r :
       {LayerNormRequest(), RmsNormRequest(), BatchNormRequest(true), BatchNormRequest(false),
        GroupNormRequest(4), InstanceNormRequest(), QkNormRequest()}) {
    v1::NormalizeResponse response;
    absl::StatusOr<Job> job = BuildJob(r, limits, &response);
    ASSERT_TRUE(job.ok()) << r.id() << ": " << job.status();
    const v1::Tensor& in = r.has_qk_norm() ? r.qk_norm().q() : r.input();
    EXPECT_EQ(response.output().shape().size(), in.shape().size()) << r.id();
    EXPECT_EQ(response.output().data().size(), in.data().size()) << r.id();
  }
}

TEST(ValidationTest, ZeroSizedTensorsAreEmptyJobs) {
  Limits limits;
  v1::NormalizeRequest r = RmsNormRequest({0, 4});
  v1::NormalizeResponse response;
  absl::StatusOr<Job> job = BuildJob(r, limits, &response);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->empty);
  EXPECT_EQ(response.output().shape(0), 0);
  EXPECT_TRUE(response.output().data().empty());
}

}  // namespace
}  // namespace normd::server
