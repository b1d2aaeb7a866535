#include "normd/common/process_tuning.h"

#include <malloc.h>

#include "absl/synchronization/mutex.h"

namespace normd {

void TuneProcessForMessages() {
  mallopt(M_TRIM_THRESHOLD, 8 << 20);
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kOwnMappingBytes));
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void TuneProcessForLargeAnswers() { mallopt(M_TOP_PAD, 16 << 20); }

}  // namespace normd
