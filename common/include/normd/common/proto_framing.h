// Protobuf framing written by hand, for messages whose large `bytes` fields are sent as
// gRPC slices that point at memory already holding the bytes, rather than copied into a
// serialized message (client/chunk_wire.h, server/answer_wire.h).
//
// A message serialized without such a field, followed by the field framed on its own, is
// one valid message: protobuf merges a repeated occurrence of an embedded message into
// the first (the encoding spec, "Last One Wins" and merging).
//
// Header-only, so that the installed client library needs no normd_common.
//
// Thread safety: pure functions.
#ifndef NORMD_COMMON_PROTO_FRAMING_H_
#define NORMD_COMMON_PROTO_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace normd {

namespace proto_framing_internal {

constexpr uint64_t kLengthDelimited = 2;  // the wire type of bytes, strings and messages

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline uint64_t Tag(int field) { return (static_cast<uint64_t>(field) << 3) | kLengthDelimited; }

}  // namespace proto_framing_internal

// The bytes that go in front of `size` bytes to make them the length-delimited field at
// `path`, field numbers from the top-level message down to the bytes field itself
// ({1, 3}: field 3 of the message in field 1): each field's tag and length, outermost
// first.
inline std::string LengthDelimitedFraming(absl::Span<const int> path, size_t size) {
  using namespace proto_framing_internal;  // NOLINT
  // Each level's length covers the levels inside it and the bytes: computed inside out.
  std::vector<uint64_t> length(path.size());
  uint64_t inside = size;
  for (size_t k = path.size(); k-- > 0;) {
    length[k] = inside;
    inside += VarintSize(Tag(path[k])) + VarintSize(inside);
  }
  std::string out;
  for (size_t k = 0; k < path.size(); ++k) {
    PutVarint(Tag(path[k]), &out);
    PutVarint(length[k], &out);
  }
  return out;
}

}  // namespace normd

#endif  // NORMD_COMMON_PROTO_FRAMING_H_
