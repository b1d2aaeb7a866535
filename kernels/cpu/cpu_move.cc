#include "kernels/cpu/cpu_move.h"

namespace normd::kernels::cpu {

#if defined(__linux__)
ScopedMoveOffCpu::ScopedMoveOffCpu(int cpu) {
  // A mask of CPU_SETSIZE (1024) CPUs: on larger machines sched_getaffinity fails with
  // EINVAL, and the thread stays where it is.
  if (cpu < 0 || cpu >= CPU_SETSIZE) return;
  if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) return;
  cpu_set_t others = saved_;
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) == 0) return;
  moved_ = sched_setaffinity(0, sizeof(others), &others) == 0;
}

ScopedMoveOffCpu::~ScopedMoveOffCpu() {
  if (moved_) sched_setaffinity(0, sizeof(saved_), &saved_);
}
#else
ScopedMoveOffCpu::ScopedMoveOffCpu(int) {}
ScopedMoveOffCpu::~ScopedMoveOffCpu() {}
#endif

}  // namespace normd::kernels::cpu
