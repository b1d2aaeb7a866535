// Checks a server's answer against the float64 reference, built from the request alone
// by normbench's verifier (normd/load/verify.h): the wire tensors are read there, and
// every default is written out there as docs/semantics.md states it, without the server's
// parser (BuildJob). A default the server misreads therefore shows up as a mismatch
// instead of cancelling out. Every returned tensor is compared under the accuracy rule
// (tests/kernels/test_util.h), element by element with gtest's messages.
// Not thread-safe (gtest assertions).
#ifndef NORMD_TESTS_INTEGRATION_ORACLE_H_
#define NORMD_TESTS_INTEGRATION_ORACLE_H_

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "normd/load/verify.h"
#include "normd/v1/normd.pb.h"
#include "tests/kernels/test_util.h"

namespace normd::testing {

inline void ExpectTensorMatches(const v1::Tensor& got, const std::vector<double>& ref,
                                const std::string& what, const std::vector<double>& magnitude = {},
                                const std::vector<double>& alt = {}) {
  const kernels::DType dtype = got.dtype() == v1::DATA_TYPE_F16    ? kernels::DType::kF16
                               : got.dtype() == v1::DATA_TYPE_BF16 ? kernels::DType::kBF16
                                                                   : kernels::DType::kF32;
  int64_t numel = 1;
  for (int64_t d : got.shape()) numel *= d;
  ASSERT_EQ(static_cast<int64_t>(got.data().size()), numel * kernels::ElementSize(dtype)) << what;
  ASSERT_EQ(numel, static_cast<int64_t>(ref.size())) << what;
  Buffer b(dtype, numel);
  std::memcpy(b.bytes.data(), got.data().data(), got.data().size());
  ExpectAllMatch(b, ref, what, magnitude, alt);
}

inline void ExpectMatchesOracle(const v1::NormalizeRequest& request,
                                const v1::NormalizeResponse& got, const std::string& what) {
  EXPECT_EQ(got.id(), request.id()) << what;
  ASSERT_FALSE(got.has_error()) << what << ": " << got.error().message();
  absl::StatusOr<Reference> reference = ComputeReference(request);
  ASSERT_TRUE(reference.ok()) << what << ": " << reference.status();
  for (const auto& [field, values] : reference->tensors) {
    EXPECT_TRUE(HasField(got, field)) << what << " " << FieldName(field);
    const auto m = reference->magnitudes.find(field);
    const auto alt = reference->alternatives.find(field);
    ExpectTensorMatches(FieldOf(got, field), values, what + " " + FieldName(field),
                        m == reference->magnitudes.end() ? std::vector<double>{} : m->second,
                        alt == reference->alternatives.end() ? std::vector<double>{} : alt->second);
  }
  // Cross-check of the two comparisons: the verifier counts no mismatch either.
  EXPECT_EQ(Mismatches(*reference, got), 0) << what;
}

}  // namespace normd::testing

#endif  // NORMD_TESTS_INTEGRATION_ORACLE_H_
