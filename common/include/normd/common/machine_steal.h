// How much CPU time the hypervisor took from this machine: the "steal" column of Linux's
// /proc/stat, summed over every CPU. Benchmarks print it beside their figures, because on
// a virtual machine a run whose cores were taken away for a while shows it in its tail
// latencies, and nothing else in the run would say why.
//
// Thread safety: may be called from any thread.
#ifndef NORMD_COMMON_MACHINE_STEAL_H_
#define NORMD_COMMON_MACHINE_STEAL_H_

#include <optional>

#include "absl/time/time.h"

namespace normd {

// The machine's total steal time since boot; nullopt where /proc/stat has no steal column
// (not Linux, or a kernel without it).
std::optional<absl::Duration> MachineStealTime();

// Milliseconds of steal between two readings, or -1 when either is missing.
int64_t StealMs(std::optional<absl::Duration> before, std::optional<absl::Duration> after);

}  // namespace normd

#endif  // NORMD_COMMON_MACHINE_STEAL_H_
