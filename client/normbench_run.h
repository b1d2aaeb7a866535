// normbench's runner: one measured run at a concurrency or rate, with its warmup, its
// measurement windows and stability rule, and the progress line on a terminal; the load
// itself comes from normd_load (load_gen.h).
// Thread safety: a Bench runs one run at a time, from one thread.
#ifndef NORMD_CLIENT_NORMBENCH_RUN_H_
#define NORMD_CLIENT_NORMBENCH_RUN_H_

#include <unistd.h>

#include <atomic>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "normbench_report.h"
#include "normd/client.h"
#include "normd/load/load_gen.h"
#include "normd/load/workload.h"

namespace normd {

// Runs normbench's measurements with one client and one workload.
class Bench {
 public:
  Bench(Config config, Workload workload, std::unique_ptr<Client> client)
      : config_(std::move(config)),
        workload_(std::move(workload)),
        client_(std::move(client)),
        clients_{client_.get()},
        progress_(isatty(STDERR_FILENO) != 0) {}

  // Warms up, then measures one run at `level` (callers, or requests/s with --rate) of
  // Normalize, or of Echo with `echo`, until the Config says it is over.
  RunResult Run(double level, bool echo);

  const Config& config() const { return config_; }
  const Workload& workload() const { return workload_; }

 private:
  static bool Measuring(const LoadRecorder& recorder);

  // The one-line progress display on stderr (a terminal only).
  void Progress(const LoadRecorder& recorder, double level, bool echo, absl::Duration t);

  Config config_;
  Workload workload_;
  std::unique_ptr<Client> client_;  // its channel pool is the --connections
  std::vector<Client*> clients_;    // the generators' view: this one client
  std::atomic<bool> done_{false};
  bool progress_ = false;
};

}  // namespace normd

#endif  // NORMD_CLIENT_NORMBENCH_RUN_H_
