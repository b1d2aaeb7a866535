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
#include <limits>
#include <map>
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

// What a correct answer holds: each returned tensor's reference values, unrounded, and for
// the outputs that sum terms after normalizing, each element's magnitude M of the accuracy
// rule (normd/kernels/accuracy.h; absent: the rule's third clause does not apply).
struct Reference {
  std::vector<std::pair<ResponseField, std::vector<double>>> tensors;
  std::map<ResponseField, std::vector<double>> magnitudes;
  // cast_before_weight: each element's value with the intermediate at its other neighbour
  // (reference::RowNormResult::y_alt), NaN where none.
  std::map<ResponseField, std::vector<double>> alternatives;

  // M of element i of `field`, 0 when there is none.
  double Magnitude(ResponseField field, size_t i) const { return At(magnitudes, field, i, 0.0); }
  // The alternative of element i of `field`, NaN when there is none.
  double Alternative(ResponseField field, size_t i) const {
    return At(alternatives, field, i, std::numeric_limits<double>::quiet_NaN());
  }

 private:
  static double At(const std::map<ResponseField, std::vector<double>>& m, ResponseField field,
                   size_t i, double none) {
    const auto it = m.find(field);
    return it == m.end() || i >= it->second.size() ? none : it->second[i];
  }
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
