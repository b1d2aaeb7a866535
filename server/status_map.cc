#include "server/status_map.h"

#include <string>

namespace normd::server {

void ToRpcStatus(const absl::Status& s, google::rpc::Status* out) {
  out->set_code(static_cast<int>(s.code()));
  out->set_message(std::string(s.message()));
  s.ForEachPayload([out](absl::string_view type_url, const absl::Cord& payload) {
    google::protobuf::Any* detail = out->add_details();
    detail->set_type_url(std::string(type_url));
    detail->set_value(std::string(payload));
  });
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  google::rpc::Status rich;
  ToRpcStatus(s, &rich);
  return {static_cast<grpc::StatusCode>(s.code()), std::string(s.message()),
          rich.SerializeAsString()};
}

}  // namespace normd::server
