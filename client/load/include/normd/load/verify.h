// normbench --verify: the float64 reference answer of a NormalizeRequest, computed locally
// from the request alone (the wire tensors read here, every default written out as
// docs/semantics.md states it, without the server's parser), and a response checked
// against it element by element under the accuracy rule (normd/kernels/accuracy.h). The
// integration tests' oracle uses the same translation.
//
// Stateless functions; a Reference is an immutable value once computed, safe to share
// between threads.
#ifndef NORMD_LOAD_VERIFY_H_
#define NORMD_LOAD_VERIFY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "normd/v1/normd.pb.h"

namespace normd {

// A tensor of NormalizeResponse that an op returns.
enum class ResponseField {
  kOutput,
  kKOutput,
  kResidualSum,
  kBatchMean,
  kBatchVar,
  kRunningMean,
  kRunningVar
};
const char* FieldName(ResponseField f);  // "output", "k_output", ...
const v1::Tensor& FieldOf(const v1::NormalizeResponse& r, ResponseField f);
bool HasField(const v1::NormalizeResponse& r, ResponseField f);

// What a correct answer holds: each returned tensor's reference values, unrounded.
struct Reference {
  std::vector<std::pair<ResponseField, std::vector<double>>> tensors;
};

// INVALID_ARGUMENT when the request has no op or its tensors do not fit their shapes
// (such a request is not a valid load to verify).
absl::StatusOr<Reference> ComputeReference(const v1::NormalizeRequest& request);

// Elements of `response` outside the accuracy rule, a missing tensor or one of the wrong
// size counting as all its elements; `first` (optional) says where the first was.
int64_t Mismatches(const Reference& reference, const v1::NormalizeResponse& response,
                   std::string* first = nullptr);

}  // namespace normd

#endif  // NORMD_LOAD_VERIFY_H_
