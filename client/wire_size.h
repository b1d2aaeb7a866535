// Sizes of wire tensors (normd.v1.Tensor) from their dtype and shape, for the client's
// chunking and shared-memory placement (private to the client library). Pure functions.
#ifndef NORMD_CLIENT_WIRE_SIZE_H_
#define NORMD_CLIENT_WIRE_SIZE_H_

#include <cstdint>

#include "normd/v1/normd.pb.h"

namespace normd {

// Bytes of one element; 0 for a dtype the client does not know.
inline int64_t WireElementSize(v1::DataType t) {
  switch (t) {
    case v1::DATA_TYPE_F32:
      return 4;
    case v1::DATA_TYPE_F16:
    case v1::DATA_TYPE_BF16:
      return 2;
    default:
      return 0;
  }
}

// Bytes of a tensor of `shape` in `t` (dims taken as they are).
inline int64_t WireBytes(v1::DataType t, const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t n = WireElementSize(t);
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace normd

#endif  // NORMD_CLIENT_WIRE_SIZE_H_
