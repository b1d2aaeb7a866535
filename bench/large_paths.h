// One size of normd-large-bench: a random f32 [rows, cols] LayerNorm request and the ways
// to run it (the kernel alone, a normd call, a normd call through shared memory), each
// timed from the caller's side.
//
// Thread safety: a LargeCase is used from one thread.
#ifndef NORMD_BENCH_LARGE_PATHS_H_
#define NORMD_BENCH_LARGE_PATHS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "normd/client.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::bench {

struct LargeCase {
  static LargeCase Make(int64_t rows, int64_t cols);

  // The CpuBackend's LayerNorm on the request's input, into a buffer of its own: the first
  // run's answer is `expected`, every later one is checked against it (untimed).
  absl::StatusOr<absl::Duration> RunKernel(kernels::CpuBackend& backend);
  // client.Normalize(request); the answer's bytes checked against the kernel's.
  // A Normalize call answered into `answer`, whose buffers the next call reuses (as the
  // TCP echo reuses its receive buffer).
  absl::StatusOr<absl::Duration> Call(Client& client);
  // The input placed in a shared-memory region registered with the server, the output
  // written by the server into the same region (after the input), read back in place.
  absl::StatusOr<absl::Duration> CallShm(Client& client);

  int64_t rows = 0, cols = 0;
  v1::NormalizeRequest request;
  // CallShm's region (the input, then the output) and request, made by its first call.
  std::shared_ptr<SharedMemoryRegion> region;
  v1::NormalizeRequest shm_request;
  // Each CallShm's server-side timing (NormalizeResponse.timing), in call order: where the
  // round trip beyond the kernel goes (the server's compute, its own overhead, the wire).
  std::vector<v1::Timing> shm_timings;
  v1::NormalizeResponse answer;
  std::string expected;       // the kernel's output bytes, once RunKernel ran
  std::string kernel_output;  // RunKernel's later answers, checked against `expected`
};

}  // namespace normd::bench

#endif  // NORMD_BENCH_LARGE_PATHS_H_
