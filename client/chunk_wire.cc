#include "chunk_wire.h"

#include <algorithm>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"
#include "normd/common/proto_framing.h"

namespace normd {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

uint32_t LengthTag(int field) {
  return WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

void ReleaseSource(void* holder) {
  delete static_cast<std::shared_ptr<const ChunkSource>*>(holder);
}

// Appends `size` bytes of `in` to `to`, straight from the input's buffers.
bool AppendRaw(CodedInputStream* in, uint32_t size, std::string* to) {
  while (size > 0) {
    const void* p;
    int n;
    if (!in->GetDirectBufferPointer(&p, &n) || n <= 0) return false;
    const uint32_t take = std::min<uint32_t>(size, static_cast<uint32_t>(n));
    to->append(static_cast<const char*>(p), take);
    in->Skip(static_cast<int>(take));
    size -= take;
  }
  return true;
}

bool IsTensorField(int field) {
  return field == v1::NormalizeResponse::kOutputFieldNumber ||
         field == v1::NormalizeResponse::kKOutputFieldNumber ||
         field == v1::NormalizeResponse::kResidualSumFieldNumber;
}

// One Tensor of the answer (the input is limited to it): `data` to the sink, the other
// fields to `out`. Returns an error message or empty.
std::string ReadTensor(CodedInputStream* in, int field,
                       absl::FunctionRef<std::string*(int, size_t)> sink, std::string* out) {
  StringOutputStream stream(out);
  CodedOutputStream rest(&stream);
  while (const uint32_t tag = in->ReadTag()) {
    if (tag == LengthTag(v1::Tensor::kDataFieldNumber)) {
      uint32_t size;
      if (!in->ReadVarint32(&size)) return "a truncated tensor";
      std::string* to = sink(field, size);
      if (to == nullptr) return "a chunk's output of an unexpected size";
      if (!AppendRaw(in, size, to)) return "a truncated tensor";
    } else if (!WireFormatLite::SkipField(in, tag, &rest)) {
      return "a malformed tensor";
    }
  }
  return in->BytesUntilLimit() == 0 ? "" : "a malformed tensor";
}

}  // namespace

grpc::ByteBuffer EncodeChunk(const v1::NormalizeRequest& meta, const std::vector<ChunkBytes>& bytes,
                             const std::shared_ptr<const ChunkSource>& source) {
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * bytes.size());
  slices.emplace_back(meta.SerializeAsString());
  for (const ChunkBytes& b : bytes) {
    slices.emplace_back(LengthDelimitedFraming(*b.path, b.size));
    // gRPC only reads the bytes; the slice keeps the request alive until it is written.
    slices.emplace_back(const_cast<char*>(b.data), b.size, &ReleaseSource,
                        new std::shared_ptr<const ChunkSource>(source));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status ReadChunkAnswer(grpc::ByteBuffer* answer,
                             absl::FunctionRef<std::string*(int field, size_t size)> sink,
                             v1::NormalizeResponse* meta) {
  std::string rest, error;
  {
    grpc::ProtoBufferReader reader(answer);
    CodedInputStream in(&reader);
    StringOutputStream stream(&rest);
    CodedOutputStream out(&stream);
    while (const uint32_t tag = in.ReadTag()) {
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      if (!IsTensorField(field) || tag != LengthTag(field)) {
        if (!WireFormatLite::SkipField(&in, tag, &out)) error = "a malformed answer";
      } else if (uint32_t length; !in.ReadVarint32(&length)) {
        error = "a truncated answer";
      } else {
        const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
        std::string tensor;
        error = ReadTensor(&in, field, sink, &tensor);
        in.PopLimit(limit);
        out.WriteTag(tag);
        out.WriteVarint32(static_cast<uint32_t>(tensor.size()));
        out.WriteString(tensor);
      }
      if (!error.empty()) break;
    }
    if (error.empty() && !in.ConsumedEntireMessage()) error = "a malformed answer";
  }
  if (error.empty() && !meta->ParseFromString(rest)) error = "a malformed answer";
  if (!error.empty()) return absl::InternalError("chunked call: the server sent " + error);
  return absl::OkStatus();
}

}  // namespace normd
