// The shared-memory data plane (Triton's system shared-memory extension, for callers on
// the same host): regions registered by name, each a POSIX shared-memory object mapped
// once, and a request's view of them that resolves SharedMemoryRef fields with bounds
// checks and keeps the mappings it uses alive until the request is done.
//
// A region is mapped when registered and unmapped when the last holder lets go: the
// registry until UnregisterSharedMemory, each request that uses it until its Work is
// destroyed, so unregistering while requests are in flight is safe.
//
// Thread safety: SharedMemoryRegistry is thread-safe. A SharedMemoryAccess belongs to one
// request being built, on one thread.
#ifndef NORMD_SERVER_SHARED_MEMORY_H_
#define NORMD_SERVER_SHARED_MEMORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "normd/v1/normd.pb.h"

namespace normd::server {

struct SharedMemoryRegion {
  std::string name, key;
  int64_t offset = 0, byte_size = 0;
  char* base = nullptr;  // the region's first byte (the mapping starts at the page below)
  void* mapping = nullptr;
  size_t mapping_bytes = 0;
  ~SharedMemoryRegion();
};

class SharedMemoryRegistry {
 public:
  static constexpr int kMaxRegions = 4096;

  // ALREADY_EXISTS (name taken), NOT_FOUND (no such object), INVALID_ARGUMENT (name, key,
  // offset or size malformed, or outside the object), RESOURCE_EXHAUSTED (kMaxRegions).
  absl::Status Register(const v1::RegisterSharedMemoryRequest& request);
  // NOT_FOUND for an unknown name; "" forgets every region.
  absl::Status Unregister(const std::string& name);
  absl::StatusOr<v1::SharedMemoryStatusResponse> Status(const std::string& name) const;
  // The region, held (nullptr when unknown).
  std::shared_ptr<const SharedMemoryRegion> Find(const std::string& name) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_ ABSL_GUARDED_BY(mu_);
};

// One request's references into shared memory.
class SharedMemoryAccess {
 public:
  // `registry` null: shared memory is off, and every reference is INVALID_ARGUMENT.
  explicit SharedMemoryAccess(const SharedMemoryRegistry* registry) : registry_(registry) {}

  // The bytes `ref` names, `want_bytes` long, as an input (field: the reference's path, e.g.
  // "input.shared_memory"). INVALID_ARGUMENT naming the sub-field when the region is unknown
  // or the range is not inside it or not `want_bytes` long.
  absl::StatusOr<const void*> Input(const v1::SharedMemoryRef& ref, const std::string& field,
                                    int64_t want_bytes);
  absl::StatusOr<void*> Output(const v1::SharedMemoryRef& ref, const std::string& field,
                               int64_t want_bytes);
  // Outputs overlapping an input or each other: INVALID_ARGUMENT naming the output, unless
  // `in_place_ok` and the output is exactly an input's range (a row op writing over its
  // own input).
  absl::Status CheckOverlaps(bool in_place_ok) const;
  bool used() const { return !held_.empty(); }
  // The mappings this request uses, to keep until its Work is done.
  std::vector<std::shared_ptr<const void>> TakeHeld() { return std::move(held_); }

 private:
  struct Range {
    const SharedMemoryRegion* region;
    int64_t offset, bytes;
    std::string field;
  };
  absl::StatusOr<char*> Resolve(const v1::SharedMemoryRef& ref, const std::string& field,
                                int64_t want_bytes, std::vector<Range>* ranges);

  const SharedMemoryRegistry* registry_;
  std::vector<std::shared_ptr<const void>> held_;
  std::vector<Range> inputs_, outputs_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_SHARED_MEMORY_H_
