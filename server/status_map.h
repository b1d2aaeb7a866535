// The one place where an absl::Status becomes what a client receives: a grpc::Status (the
// codes share numbering) whose binary details are a google.rpc.Status, or, for one
// request on a stream, that google.rpc.Status itself. Every payload of the absl::Status
// (field_error.h puts a google.rpc.BadRequest there) becomes one of its details, the
// payload's key as the Any's type URL.
//
// Stateless; safe from any thread.
#ifndef NORMD_SERVER_STATUS_MAP_H_
#define NORMD_SERVER_STATUS_MAP_H_

#include "absl/status/status.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/status.h"

namespace normd::server {

void ToRpcStatus(const absl::Status& s, google::rpc::Status* out);
grpc::Status ToGrpcStatus(const absl::Status& s);

}  // namespace normd::server

#endif  // NORMD_SERVER_STATUS_MAP_H_
