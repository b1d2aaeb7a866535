#include "server/answer_wire.h"

#include <string>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"  // SerializationTraits of protobuf messages
#include "grpcpp/support/slice.h"
#include "normd/common/proto_framing.h"
#include "server/field_error.h"

namespace normd::server {
namespace {

void FreeString(void* s) { delete static_cast<std::string*>(s); }

}  // namespace

absl::Status ParseRequest(grpc::ByteBuffer* buffer, v1::NormalizeRequest* request) {
  if (grpc::SerializationTraits<v1::NormalizeRequest>::Deserialize(buffer, request).ok()) {
    return absl::OkStatus();
  }
  return InvalidField("request", "not a NormalizeRequest message");
}

grpc::ByteBuffer SerializeAnswer(v1::NormalizeResponse* response, size_t zero_copy_bytes) {
  std::vector<grpc::Slice> tail;
  auto take = [&](v1::Tensor* t, int field) {
    if (t->data().size() < zero_copy_bytes) return;
    auto* bytes = new std::string(std::move(*t->mutable_data()));
    t->clear_data();
    tail.emplace_back(LengthDelimitedFraming({field, v1::Tensor::kDataFieldNumber}, bytes->size()));
    tail.emplace_back(bytes->data(), bytes->size(), &FreeString, bytes);
  };
  if (response->has_output()) {
    take(response->mutable_output(), v1::NormalizeResponse::kOutputFieldNumber);
  }
  if (response->has_k_output()) {
    take(response->mutable_k_output(), v1::NormalizeResponse::kKOutputFieldNumber);
  }
  if (response->has_residual_sum()) {
    take(response->mutable_residual_sum(), v1::NormalizeResponse::kResidualSumFieldNumber);
  }
  grpc::ByteBuffer head;
  bool own = false;
  // Serializing a message protobuf built cannot fail; gRPC's own call would abort too.
  GPR_ASSERT(
      grpc::SerializationTraits<v1::NormalizeResponse>::Serialize(*response, &head, &own).ok());
  if (tail.empty()) return head;
  std::vector<grpc::Slice> slices;
  GPR_ASSERT(head.Dump(&slices).ok());
  for (grpc::Slice& s : tail) slices.push_back(std::move(s));
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace normd::server
