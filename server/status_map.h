// The one place where absl::Status becomes grpc::Status (the codes share numbering).
// Stateless; safe from any thread.
#ifndef NORMD_SERVER_STATUS_MAP_H_
#define NORMD_SERVER_STATUS_MAP_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace normd::server {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return {static_cast<grpc::StatusCode>(s.code()), std::string(s.message())};
}

}  // namespace normd::server

#endif  // NORMD_SERVER_STATUS_MAP_H_
