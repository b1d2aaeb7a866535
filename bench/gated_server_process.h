// The server side of normd-rejection-bench: a real normd server (real gRPC on loopback,
// real transport and scheduler) whose CPU backend sits behind the tests' gate
// (normd_testing's GatedBackend), in a child process that the bench steers over a pipe.
// Separate processes, as normd and its callers are: in one process gRPC's pollers handle
// both sides' sockets on whichever thread polls.
//
// Thread safety: a GatedServerProcess is used from one thread.
#ifndef NORMD_BENCH_GATED_SERVER_PROCESS_H_
#define NORMD_BENCH_GATED_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"

namespace normd::bench {

// This process's CPU time so far, every thread, in microseconds.
int64_t ProcessCpuUs();

// The bench's end of the pipes to the gated server process.
class GatedServerProcess {
 public:
  struct Stats {
    int64_t queued = -1, rejected_full = -1, cpu_us = -1;
  };

  // Forks the server, whose queue holds `queue` requests at most; called before this
  // process starts anything of gRPC's, which does not survive a fork.
  static absl::StatusOr<GatedServerProcess> Start(int64_t queue);

  int port() const { return port_; }
  void Close() { Ask("close"); }  // the gate: backend calls block on entry
  void Open() { Ask("open"); }
  int64_t Entered();  // backend calls so far
  Stats GetStats();
  // Stops the server, which drains first; its exit status.
  int Quit();

 private:
  std::string Ask(const char* cmd);
  std::string Read();

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  int port_ = 0;
};

}  // namespace normd::bench

#endif  // NORMD_BENCH_GATED_SERVER_PROCESS_H_
