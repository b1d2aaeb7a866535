// Client's shared-memory calls (client.h): registering regions, forgetting them, their
// status, and registering again after a server forgot them.
#include "absl/strings/match.h"
#include "chunking.h"
#include "normd/client.h"

namespace normd {

absl::Status Client::RegisterSharedMemory(const SharedMemoryRegion& region) {
  v1::RegisterSharedMemoryRequest request;
  request.set_name(region.name());
  request.set_key(region.key());
  request.set_byte_size(static_cast<int64_t>(region.size()));
  return RegisterSharedMemory(request);
}

absl::Status Client::RegisterSharedMemory(const v1::RegisterSharedMemoryRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::RegisterSharedMemoryResponse response;
  absl::Status s = StatusFromGrpc(Next().norm->RegisterSharedMemory(&context, request, &response));
  if (s.ok()) {
    absl::MutexLock l(&regions_mu_);
    regions_[request.name()] = request;
  }
  return s;
}

absl::Status Client::UnregisterSharedMemory(const std::string& name) {
  {
    absl::MutexLock l(&regions_mu_);
    if (name.empty()) {
      regions_.clear();
    } else {
      regions_.erase(name);
    }
  }
  grpc::ClientContext context;
  Prepare(&context);
  v1::UnregisterSharedMemoryRequest request;
  request.set_name(name);
  v1::UnregisterSharedMemoryResponse response;
  return StatusFromGrpc(Next().norm->UnregisterSharedMemory(&context, request, &response));
}

absl::StatusOr<v1::SharedMemoryStatusResponse> Client::SharedMemoryStatus(const std::string& name) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::SharedMemoryStatusRequest request;
  request.set_name(name);
  v1::SharedMemoryStatusResponse response;
  if (absl::Status s =
          StatusFromGrpc(Next().norm->SharedMemoryStatus(&context, request, &response));
      !s.ok()) {
    return s;
  }
  return response;
}

Client::~Client() {
  absl::MutexLock l(&regions_mu_);
  regions_mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &reregistering_));
}

void Client::NoteFailure(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      !absl::EndsWith(ErrorField(status), "shared_memory.region")) {
    return;
  }
  // On gRPC's callback API: this may run on a gRPC thread, which must not block. A region
  // the server still knows answers ALREADY_EXISTS, which is fine.
  absl::MutexLock l(&regions_mu_);
  for (const auto& [name, request] : regions_) {
    struct Call {
      grpc::ClientContext context;
      v1::RegisterSharedMemoryRequest request;
      v1::RegisterSharedMemoryResponse response;
    };
    auto* call = new Call;
    call->request = request;
    Prepare(&call->context);
    ++reregistering_;
    Next().norm->async()->RegisterSharedMemory(&call->context, &call->request, &call->response,
                                               [this, call](grpc::Status) {
                                                 delete call;  // its channel reference first
                                                 absl::MutexLock l(&regions_mu_);
                                                 --reregistering_;
                                               });
  }
}

}  // namespace normd
