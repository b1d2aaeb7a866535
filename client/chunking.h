// How the client splits a large row-wise request into row chunks and puts the chunks'
// answers back together (private to the client library; chunked_call.cc sends them).
//
// LayerNorm, RMSNorm, L2 and QK-norm, also with a residual, normalize every row on its
// own: rows [a, b) of the output depend only on rows [a, b) of the inputs. A chunk is the
// request with its row tensors (input, residual skip; q and k) cut to a range of rows and
// reshaped to [rows, row dims...]; everything else (weights, eps, flags) is copied. The
// server computes each row exactly as it would inside the whole tensor, so the assembled
// answer is bit-identical to one Normalize call. The channel ops (BatchNorm, GroupNorm,
// InstanceNorm) take statistics across rows and are never split.
//
// Thread safety: a ChunkPlan is immutable once made; ChunkAssembler is not thread-safe.
#ifndef NORMD_CLIENT_CHUNKING_H_
#define NORMD_CLIENT_CHUNKING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "chunk_wire.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "normd/v1/normd.pb.h"

namespace normd {

// One row tensor of the request that chunks cut (input, skip, q or k).
struct ChunkedTensor {
  v1::Tensor* (*mutable_in)(v1::NormalizeRequest*);  // where it lives in a request
  const v1::Tensor* (*in)(const v1::NormalizeRequest&);
  std::vector<int> path;          // field numbers from the request to its bytes (chunk_wire.h)
  std::vector<int64_t> shape;     // the whole tensor's
  std::vector<int64_t> row_dims;  // the dims of one row (the trailing, normalized ones)
  int64_t rows = 0;
  int64_t row_bytes = 0;
  std::vector<int64_t> starts;  // chunk i holds rows [starts[i], starts[i + 1])
};

struct ChunkPlan {
  int chunks = 0;
  v1::NormalizeRequest skeleton;       // the request without its row tensors' data
  std::vector<ChunkedTensor> tensors;  // [input, skip] or [q, k]
};

// The plan for `request` with chunks of about `chunk_bytes` of input, or nullopt when the
// request is not row-wise, has fewer than `threshold_bytes` of row tensors, or would make
// a single chunk. Malformed requests get no plan: the server answers them whole.
std::optional<ChunkPlan> PlanChunks(const v1::NormalizeRequest& request, int64_t threshold_bytes,
                                    int64_t chunk_bytes);

// "/normd.v1.NormService/NormalizeStream": the method the chunked calls open by name on
// the generic stub (their messages are written by hand).
const std::string& NormalizeStreamMethod();

// Chunk `i` of `source->whole` under `plan`, its rows' bytes not copied (chunk_wire.h).
grpc::ByteBuffer MakeChunk(const ChunkPlan& plan, int i,
                           const std::shared_ptr<const ChunkSource>& source);

// Puts the chunks' responses, added in order, together into one response.
class ChunkAssembler {
 public:
  // Assembles into `into` when it is not null (a blocking caller's response, whose output
  // buffers are reused: no allocation or page faults when they are large enough).
  ChunkAssembler(const v1::NormalizeRequest& whole, const ChunkPlan& plan,
                 v1::NormalizeResponse* into = nullptr);
  // Appends chunk `added()`'s outputs, read from its answer message; an error response
  // (`error` set) is returned as its status, naming the field as the whole request's.
  absl::Status Add(grpc::ByteBuffer* part);
  int added() const { return added_; }
  // The whole response; once every chunk was added (empty when assembled into `into`).
  v1::NormalizeResponse Take() { return std::move(whole_); }

 private:
  const ChunkPlan& plan_;
  int64_t row_bytes_[2] = {0, 0};  // of output and k_output / residual_sum, from chunk 0
  v1::NormalizeResponse whole_;
  v1::NormalizeResponse* const out_;  // whole_ or the caller's
  std::string spare_[2];              // the caller's output buffers, for reuse
  int added_ = 0;
};

// A stream response's `error` (a google.rpc.Status) as an absl::Status with its details as
// payloads, as a unary call's status would carry them.
absl::Status StatusFromRpc(const google::rpc::Status& error);
// A call's status with the server's details (a google.rpc.Status in the binary details)
// as payloads keyed by their type URLs.
absl::Status StatusFromGrpc(const grpc::Status& s);

}  // namespace normd

#endif  // NORMD_CLIENT_CHUNKING_H_
