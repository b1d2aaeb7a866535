// The limit a large-tensor round trip is measured against: the same bytes sent over a
// plain loopback TCP connection and echoed back by a thread that writes what it reads,
// with no framing, parsing or compute (normd-large-bench).
//
// Thread safety: a TcpEcho is used from one thread; its echo thread is its own.
#ifndef NORMD_BENCH_TCP_ECHO_H_
#define NORMD_BENCH_TCP_ECHO_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace normd::bench {

class TcpEcho {
 public:
  // Listens on 127.0.0.1, starts the echo thread and connects to it.
  static absl::StatusOr<std::unique_ptr<TcpEcho>> Start();
  ~TcpEcho();

  // Sends `bytes` and reads them back, one thread polling both directions at once (as a
  // gRPC client's does); the time from the first byte written to the last read.
  absl::StatusOr<absl::Duration> RoundTrip(const std::string& bytes);

 private:
  TcpEcho() = default;
  int listener_ = -1, client_ = -1;
  std::thread echo_;
  std::string back_;
};

}  // namespace normd::bench

#endif  // NORMD_BENCH_TCP_ECHO_H_
