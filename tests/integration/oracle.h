// Checks a server's answer against the float64 reference: the request is validated and
// turned into kernel arguments locally (BuildJob), the reference evaluates them, and every
// returned tensor is compared under SEMANTICS.md's accuracy rule. Not thread-safe.
#ifndef NORMD_TESTS_INTEGRATION_ORACLE_H_
#define NORMD_TESTS_INTEGRATION_ORACLE_H_

#include <string>

#include "gtest/gtest.h"
#include "normd/kernels/reference.h"
#include "normd/v1/normd.pb.h"
#include "server/request_builder.h"
#include "tests/kernels/test_util.h"

namespace normd::testing {

inline void ExpectTensorMatches(const v1::Tensor& got, const std::vector<double>& ref,
                                const std::string& what) {
  absl::StatusOr<server::TensorInfo> info = server::CheckTensor(got, what, server::Limits{});
  ASSERT_TRUE(info.ok()) << info.status();
  Buffer b(info->dtype, info->numel);
  std::memcpy(b.bytes.data(), info->data, got.data().size());
  ExpectAllMatch(b, ref, what);
}

inline void ExpectMatchesOracle(const v1::NormalizeRequest& request,
                                const v1::NormalizeResponse& got, const std::string& what) {
  v1::NormalizeResponse scratch;
  absl::StatusOr<server::Job> job = server::BuildJob(request, server::Limits{}, &scratch);
  ASSERT_TRUE(job.ok()) << what << ": " << job.status();
  EXPECT_EQ(got.id(), request.id()) << what;
  using F = server::Job::Family;
  switch (job->family) {
    case F::kRowNorm: {
      auto ref = kernels::reference::RowNorm(job->row);
      ExpectTensorMatches(got.output(), ref.y, what + " y");
      if (job->row.h.present()) ExpectTensorMatches(got.residual_sum(), ref.h, what + " h");
      break;
    }
    case F::kQkNorm:
      ExpectTensorMatches(got.output(), kernels::reference::RowNorm(job->row).y, what + " q");
      ExpectTensorMatches(got.k_output(), kernels::reference::RowNorm(job->row_k).y, what + " k");
      break;
    case F::kBatchNorm: {
      auto ref = kernels::reference::BatchNorm(job->batch);
      ExpectTensorMatches(got.output(), ref.y, what + " y");
      if (job->batch.training) {
        ExpectTensorMatches(got.batch_mean(), ref.mean, what + " mean");
        ExpectTensorMatches(got.batch_var(), ref.var, what + " var");
        if (job->batch.running_mean.present()) {
          ExpectTensorMatches(got.running_mean(), ref.running_mean, what + " running_mean");
          ExpectTensorMatches(got.running_var(), ref.running_var, what + " running_var");
        }
      }
      break;
    }
    case F::kGroupNorm:
      ExpectTensorMatches(got.output(), kernels::reference::GroupNorm(job->group), what + " y");
      break;
  }
}

}  // namespace normd::testing

#endif  // NORMD_TESTS_INTEGRATION_ORACLE_H_
