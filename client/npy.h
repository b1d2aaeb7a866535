// Reading and writing NumPy .npy files (format 1.0-3.0, little-endian, C order) as
// HostTensors. '<f4' -> F32, '<f2' -> F16, '<f8' -> F32 (rounded to nearest). NumPy has no
// bfloat16, so BF16 tensors are written as '<f4' (exact). Stateless; thread-safe.
#ifndef NORMD_CLIENT_NPY_H_
#define NORMD_CLIENT_NPY_H_

#include <string>

#include "absl/status/statusor.h"
#include "normd/host_tensor.h"

namespace normd {

absl::StatusOr<HostTensor> ReadNpy(const std::string& path);
absl::Status WriteNpy(const std::string& path, const HostTensor& t);

// The same on in-memory bytes, for tests.
absl::StatusOr<HostTensor> ParseNpy(const std::string& bytes, const std::string& what);
std::string SerializeNpy(const HostTensor& t);

}  // namespace normd

#endif  // NORMD_CLIENT_NPY_H_
