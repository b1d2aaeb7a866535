// The wire form of a chunked call's messages (private to the client library), written and
// read by hand so that a chunk's tensor bytes are copied neither into a chunk message nor
// out of a chunk's answer message.
//
// A chunk goes out as one gRPC ByteBuffer whose slices are: the chunk's small metadata (the
// plan's skeleton with the chunk's shapes), serialized by protobuf; then, per row tensor, a
// few bytes of protobuf framing and a slice that points into the caller's request at the
// chunk's rows. Protobuf merges a repeated occurrence of an embedded message into the first
// (the encoding spec, "Last One Wins" and merging), so the server parses one ordinary
// NormalizeRequest. The slices hold a reference to the request (ChunkSource) until gRPC has
// written them, however the call ends.
//
// A chunk's answer is read field by field: the `data` of `output`, `k_output` and
// `residual_sum` is appended straight from gRPC's receive slices to the assembled
// response; every other field goes to a small metadata message parsed by protobuf.
//
// Thread safety: the functions are reentrant; a ChunkSource is immutable and shared.
#ifndef NORMD_CLIENT_CHUNK_WIRE_H_
#define NORMD_CLIENT_CHUNK_WIRE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "normd/v1/normd.pb.h"

namespace normd {

// The whole request a chunked call sends, kept alive by the call and by every slice that
// points into it. `on_release` runs when the last of them lets go (a blocking caller waits
// for it before its request may go).
struct ChunkSource {
  ChunkSource(v1::NormalizeRequest owned, const v1::NormalizeRequest* borrowed,
              std::function<void()> on_release)
      : owned(std::move(owned)),
        whole(borrowed != nullptr ? *borrowed : this->owned),
        on_release(std::move(on_release)) {}
  ~ChunkSource() {
    if (on_release) on_release();
  }
  const v1::NormalizeRequest owned;
  const v1::NormalizeRequest& whole;
  const std::function<void()> on_release;
};

// One row tensor's bytes in a chunk: the field numbers from the request down to the
// Tensor's `data` field, and the bytes.
struct ChunkBytes {
  const std::vector<int>* path;
  const char* data;
  size_t size;
};

// `meta` serialized, followed by every tensor's bytes framed as the field at its path; the
// bytes are not copied (their slices hold `source`).
grpc::ByteBuffer EncodeChunk(const v1::NormalizeRequest& meta, const std::vector<ChunkBytes>& bytes,
                             const std::shared_ptr<const ChunkSource>& source);

// Reads a NormalizeResponse from `answer`: the `data` of its tensor fields goes to the
// string `sink(field number, size)` returns (appended; null refuses the answer), the rest
// into `meta`. Errors: the answer is not a NormalizeResponse, or `sink` refused it.
absl::Status ReadChunkAnswer(grpc::ByteBuffer* answer,
                             absl::FunctionRef<std::string*(int field, size_t size)> sink,
                             v1::NormalizeResponse* meta);

}  // namespace normd

#endif  // NORMD_CLIENT_CHUNK_WIRE_H_
