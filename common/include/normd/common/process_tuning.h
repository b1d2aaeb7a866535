// Process-wide settings for programs that move tensors through gRPC (normd, normbench,
// the serving benchmarks), applied once at the start of main.
//
// Thread safety: call before starting threads.
#ifndef NORMD_COMMON_PROCESS_TUNING_H_
#define NORMD_COMMON_PROCESS_TUNING_H_

namespace normd {

// - glibc malloc: every request and response allocates and frees message-sized buffers on
//   many threads; with the default 128 KiB trim threshold the arenas hand their top pages
//   back to the kernel and fault them in again on the next message (page faults were 11%
//   of the server's CPU with 16 KiB messages). Keep up to 8 MiB at each arena's top, and
//   serve blocks below 4 MiB from the arenas rather than fresh mmaps. Measured: server CPU
//   per 1x4096 f32 request 43.8 -> 35.4 us unary and 25.6 -> 20.0 us streaming at 64
//   callers. Not more than 8 MiB: malloc_trim cannot shrink a thread arena's top, so
//   after a burst of large messages each of gRPC's threads kept what its top held (at
//   64 MiB a CI run of tests/operations/test_memory.py saw 150-180 MiB resident 10 s
//   after the burst; at 8 MiB 2-14 MiB).
// - Abseil: Debian's build keeps Mutex deadlock detection on (no NDEBUG), which maintains
//   a lock-order graph on every acquisition (2.3% of the server's CPU); Abseil's optimized
//   builds skip it, and so do these programs. The tests keep it.
void TuneProcessForMessages();

}  // namespace normd

#endif  // NORMD_COMMON_PROCESS_TUNING_H_
