// The CPU backend: every op family of ops.h, with the precision plan of cpu/stats.h (means
// and sums of squares accumulated in double, squared deviations in fp32, a double
// epilogue) and one rounding to nearest even at the end. This first version runs each request on the calling thread with plain scalar
// loops; the SIMD issue replaces the inner loops without changing this interface.
//
// Thread safety: safe for concurrent calls from multiple threads; per-call scratch is
// thread-local.
#ifndef NORMD_KERNELS_CPU_BACKEND_H_
#define NORMD_KERNELS_CPU_BACKEND_H_

#include <memory>
#include <string>

#include "normd/kernels/backend.h"

namespace normd::kernels {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string device() const override;
  int threads() const override { return 1; }

  absl::Status RowNorm(const RowNormArgs& args) override;
  absl::Status BatchNorm(const BatchNormArgs& args) override;
  absl::Status GroupNorm(const GroupNormArgs& args) override;
};

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_CPU_BACKEND_H_
