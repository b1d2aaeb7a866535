// What normbench sends: one or more request kinds (op, shape, dtype, options), each with
// random inputs drawn once from a seed and a weight for how often it is sent. Built from
// normbench's flags (one kind) or from a --mix file, a weighted list of kinds, one a line:
//
//   # weight  op          shape      dtype  options (the same flags as on the command line)
//   8         rms-norm    1x4096     bf16   --weight --residual
//   1         layer-norm  64x4096    f32    --weight --bias
//   1         group-norm  8x64x32x32 f32    --groups 32 --layout channels-last
//
// The n-th request of a run is chosen by a hash of (seed, n), so a run's sequence of
// kinds is the same every time and independent of which thread sends it.
//
// Thread safety: immutable once built (and references computed); share freely.
#ifndef NORMD_LOAD_WORKLOAD_H_
#define NORMD_LOAD_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "normd/client.h"
#include "normd/common/cli_flags.h"
#include "normd/load/verify.h"
#include "normd/shared_memory.h"
#include "normd/v1/normd.pb.h"

namespace normd {

struct WorkItem {
  std::string label;  // "rms-norm 1x4096 bf16 --weight"
  double weight = 1;
  v1::NormalizeRequest request;
  int64_t request_bytes = 0;                   // its serialized size (ids aside), counted once here
  std::shared_ptr<const Reference> reference;  // set by ComputeReferences
  // --shm: the region holding this kind's tensors and outputs (set by MoveToSharedMemory).
  std::shared_ptr<const SharedMemoryRegion> region;
};

class Workload {
 public:
  // The flags that describe one kind (names without dashes; true: boolean).
  static const std::map<std::string, bool>& Flags();
  // Usage text of those flags.
  static const char* FlagUsage();
  // One kind from parsed flags (op, shape, dtype and the op's options).
  static absl::StatusOr<Workload> FromFlags(const CliFlags& flags, uint64_t seed);
  // A request as it is (id overwritten per send): for benchmarks built on a fixed request.
  static Workload Of(const v1::NormalizeRequest& request);
  // The kinds of a --mix file's text; INVALID_ARGUMENT names the line.
  static absl::StatusOr<Workload> FromMix(const std::string& text, uint64_t seed);

  // --verify: the float64 reference answer of every kind, computed here once (before
  // MoveToSharedMemory, which takes the tensors off the requests).
  absl::Status ComputeReferences();
  // --shm: every kind's tensors moved into a shared-memory region of its own, registered
  // with `client`'s server, its outputs directed there too (one output area per kind,
  // which concurrent requests of that kind all write: the same values). The regions live
  // as long as the Workload.
  absl::Status MoveToSharedMemory(Client& client);
  // The kind of the n-th request.
  const WorkItem& Pick(uint64_t n) const;
  const std::vector<WorkItem>& items() const { return items_; }

 private:
  void Add(std::string label, double weight, v1::NormalizeRequest request);

  std::vector<WorkItem> items_;
  std::vector<double> cumulative_;                            // running sum of weights
  std::vector<std::shared_ptr<SharedMemoryRegion>> regions_;  // --shm
  uint64_t seed_ = 0;
};

}  // namespace normd

#endif  // NORMD_LOAD_WORKLOAD_H_
