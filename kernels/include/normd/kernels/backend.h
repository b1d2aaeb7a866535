// The door of the compute room: one Backend per device kind (CPU, CUDA). The scheduler
// hands it validated argument structs (ops.h); it never sees protobuf or gRPC.
//
// Thread safety: implementations are safe for concurrent calls from multiple threads
// without external synchronization; each call touches only the memory in its arguments.
#ifndef NORMD_KERNELS_BACKEND_H_
#define NORMD_KERNELS_BACKEND_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "normd/kernels/ops.h"

namespace normd::kernels {

enum class BackendKind : uint8_t { kCpu, kCuda };

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  // Human-readable device description, e.g. "x86_64, 2 threads".
  virtual std::string device() const = 0;
  virtual int threads() const = 0;
  // False after an unrecoverable device error: the backend refuses work from then on.
  virtual bool healthy() const { return true; }

  virtual absl::Status RowNorm(const RowNormArgs& args) = 0;
  // A ragged batch: several independent RowNorm calls (any kinds, sizes, parameters) in
  // one run. Each segment's outputs are bit-identical to RowNorm(segment) alone. The
  // default runs them one after another; backends override it to share one dispatch.
  virtual absl::Status RowNormBatch(absl::Span<const RowNormArgs> segments) {
    for (const RowNormArgs& s : segments) {
      if (absl::Status st = RowNorm(s); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  virtual absl::Status BatchNorm(const BatchNormArgs& args) = 0;
  virtual absl::Status GroupNorm(const GroupNormArgs& args) = 0;
};

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_BACKEND_H_
