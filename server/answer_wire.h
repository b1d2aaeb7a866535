// The NormalizeRequest and NormalizeResponse messages of the raw (ByteBuffer) methods
// Normalize, NormalizeStream and EchoStream (calls.h): a request is parsed by protobuf as
// gRPC would; a response is serialized with the bytes of each large output tensor not
// copied: the output's buffer, where the kernel wrote it, is moved out of the message into
// a gRPC slice that frees it once the transport has sent it (ARCHITECTURE.md, "the copies
// of tensor bytes"; common/proto_framing.h says why the message stays one valid message).
//
// Thread safety: reentrant; each call touches only its arguments.
#ifndef NORMD_SERVER_ANSWER_WIRE_H_
#define NORMD_SERVER_ANSWER_WIRE_H_

#include <cstddef>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "normd/v1/normd.pb.h"

namespace normd::server {

// Tensors at least this large go as slices of their own buffer; smaller ones are copied,
// which costs less than a slice and keeps the response's buffer for the next message.
inline constexpr size_t kZeroCopyAnswerBytes = size_t{64} << 10;

// Parses `buffer` (consumed) into `request`; INVALID_ARGUMENT naming the field `request`
// when it is not a NormalizeRequest.
absl::Status ParseRequest(grpc::ByteBuffer* buffer, v1::NormalizeRequest* request);

// `response` as a message; the data of its output, k_output and residual_sum tensors of at
// least `zero_copy_bytes` is moved out of `response` into the buffer's slices.
grpc::ByteBuffer SerializeAnswer(v1::NormalizeResponse* response,
                                 size_t zero_copy_bytes = kZeroCopyAnswerBytes);

}  // namespace normd::server

#endif  // NORMD_SERVER_ANSWER_WIRE_H_
