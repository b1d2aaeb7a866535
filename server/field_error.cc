#include "server/field_error.h"

#include "absl/strings/cord.h"
#include "google/rpc/error_details.pb.h"

namespace normd::server {

absl::Status FieldError(absl::StatusCode code, absl::string_view field,
                        absl::string_view description) {
  absl::Status status(code, absl::StrCat(field, ": ", description));
  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation = bad_request.add_field_violations();
  violation->set_field(std::string(field));
  violation->set_description(std::string(description));
  status.SetPayload(kBadRequestTypeUrl, absl::Cord(bad_request.SerializeAsString()));
  return status;
}

}  // namespace normd::server
