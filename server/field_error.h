// Errors that name the request field at fault. The status's message reads
// "<field>: <description>" for people, and a payload holds a google.rpc.BadRequest with
// that field violation for programs: status_map.h turns every payload into a detail of
// the google.rpc.Status a client receives, so a client in any language reads the field
// without parsing the message.
//
//   return InvalidField("layer_norm.weight.shape", "expected [4096], got [4095]");
//
// Stateless; safe from any thread.
#ifndef NORMD_SERVER_FIELD_ERROR_H_
#define NORMD_SERVER_FIELD_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace normd::server {

// The payload key of a google.rpc.BadRequest: its Any type URL.
inline constexpr absl::string_view kBadRequestTypeUrl = "type.googleapis.com/google.rpc.BadRequest";

// A status of `code` whose message is "field: description" and whose payload is a
// google.rpc.BadRequest with one violation of `field`.
absl::Status FieldError(absl::StatusCode code, absl::string_view field,
                        absl::string_view description);

// INVALID_ARGUMENT naming `field`; the description is the StrCat of `parts`.
template <class... Parts>
absl::Status InvalidField(absl::string_view field, const Parts&... parts) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, absl::StrCat(parts...));
}

}  // namespace normd::server

#endif  // NORMD_SERVER_FIELD_ERROR_H_
