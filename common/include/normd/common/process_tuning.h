// Process-wide settings for programs that move tensors through gRPC (normd, normbench,
// the serving benchmarks), applied once at the start of main.
//
// Thread safety: call before starting threads.
#ifndef NORMD_COMMON_PROCESS_TUNING_H_
#define NORMD_COMMON_PROCESS_TUNING_H_

#include <cstddef>

namespace normd {

// TuneProcessForMessages' glibc mmap threshold: blocks of this size and more are mapped on
// their own and unmapped when freed (normd's operator new advises them for huge pages).
inline constexpr std::size_t kOwnMappingBytes = 4 << 20;

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

// For clients that receive large answers (normbench, normd-large-bench), after
// TuneProcessForMessages. The thread that reads a chunked call's answers allocates gRPC's
// receive buffers (a 4 MiB answer's worth a call) in its arena and frees them once copied
// out; the main arena's top crept up by about 330 KiB a call and went back to the kernel
// at every 8 MiB (strace, 100 calls at 4 MiB and 100 at 64 MiB: 2491 brk calls), so each
// call faulted part of its receive pages in again (`exc_page_fault` under `recvmsg`, 0.1 ms
// of a 4 MiB call's CPU). glibc's M_TOP_PAD of 16 MiB keeps that much at an arena's top
// when it grows or trims (81 brk calls). Measured (bench/large_ab.sh, three A/Bs of eight
// rounds): 64 MiB chunked round trips 1.35-1.39 -> 1.19-1.22x the TCP echo; 4 MiB within
// the noise. Not for normd: every gRPC thread's arena would keep 16 MiB after a burst
// (see above).
void TuneProcessForLargeAnswers();

}  // namespace normd

#endif  // NORMD_COMMON_PROCESS_TUNING_H_
