// What the request fuzzers share: a CallEnv like normd's (a scheduler on the CPU backend,
// small limits) and Serve(), which takes a parsed NormalizeRequest the way NormalizeCall
// does (server/unary_calls.cc): MakeWork (validation, output allocation), the scheduler,
// the kernel, SerializeAnswer. Every invariant a client relies on is checked with
// FUZZ_CHECK, which aborts so that libFuzzer keeps the input as a crash:
//   - a refused request names its field (a google.rpc.BadRequest payload) and leaves the
//     response holding only the id;
//   - an accepted request's outputs are exactly the bytes their shape and dtype imply;
//   - an accepted request runs OK, and its answer serializes to a NormalizeResponse.
//
// Thread safety: Serve may be called from one thread at a time (libFuzzer's).
#ifndef NORMD_TESTS_FUZZ_FUZZ_SERVICE_H_
#define NORMD_TESTS_FUZZ_FUZZ_SERVICE_H_

#include <cstdio>
#include <cstdlib>

#include "normd/v1/normd.pb.h"
#include "server/shared_memory.h"

#define FUZZ_CHECK(cond, ...)                                 \
  do {                                                        \
    if (!(cond)) {                                            \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fputc('\n', stderr);                               \
      std::abort();                                           \
    }                                                         \
  } while (0)

namespace normd::fuzz {

// Elements per tensor the fuzzers' server accepts: small, so that every run is short.
inline constexpr int64_t kMaxElements = int64_t{1} << 16;

// Once per process: gRPC's library initialized (slices, byte buffers), and protobuf's
// parse-failure logs silenced (every malformed input would print one).
void Initialize();

// Serves `request` as normd would; `registry` resolves its shared-memory references (null:
// shared memory is off). Returns whether it was accepted and ran.
bool Serve(const v1::NormalizeRequest& request, server::SharedMemoryRegistry* registry);

}  // namespace normd::fuzz

#endif  // NORMD_TESTS_FUZZ_FUZZ_SERVICE_H_
