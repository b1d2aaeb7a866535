// Moving the calling thread off one CPU for a while: the thread pool's answer to Linux
// waking a worker onto the CPU its caller runs on while another CPU is idle (thread_pool.cc).
//
// Thread safety: a ScopedMoveOffCpu changes the CPU mask of the thread that constructs it,
// and must be destroyed on that thread.
#ifndef NORMD_KERNELS_CPU_CPU_MOVE_H_
#define NORMD_KERNELS_CPU_CPU_MOVE_H_

#if defined(__linux__)
#include <sched.h>
#endif

namespace normd::kernels::cpu {

// Confines the calling thread to the CPUs it may run on other than `cpu`, which makes Linux
// migrate it before the constructor returns (a running thread whose mask no longer holds its
// CPU is moved at once), and gives the thread its mask back when destroyed (no migration:
// the CPU it is on is in that mask). moved() is false, and nothing changed, where `cpu` is
// negative (no CPU to leave), no other CPU is allowed, the platform has no CPU masks, or the
// calls fail.
class ScopedMoveOffCpu {
 public:
  explicit ScopedMoveOffCpu(int cpu);
  ~ScopedMoveOffCpu();
  ScopedMoveOffCpu(const ScopedMoveOffCpu&) = delete;
  ScopedMoveOffCpu& operator=(const ScopedMoveOffCpu&) = delete;

  bool moved() const { return moved_; }

 private:
  bool moved_ = false;
#if defined(__linux__)
  cpu_set_t saved_{};
#endif
};

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_CPU_MOVE_H_
