// A POSIX shared-memory region for normd's shared-memory data plane (callers on the same
// host as the server): the caller places input tensors in the region, registers it with
// the server (Client::RegisterSharedMemory), and requests name byte ranges of it instead
// of carrying bytes; the server computes straight into output ranges of the region and
// answers with metadata only.
//
//   auto region = normd::SharedMemoryRegion::Create("acts", 2 * x.bytes.size());
//   client->RegisterSharedMemory(*region);
//   v1::NormalizeRequest req = normd::MakeRequest(x, opt);         // as usual, then
//   *req.mutable_input() = *region->Place(x, 0);                   // x's bytes in the region
//   *req.mutable_output_shared_memory() = region->Ref(x.bytes.size(), x.bytes.size());
//   auto r = client->Normalize(req);                                // r->output(): no data
//   absl::StatusOr<normd::HostTensor> y = region->Read(r->output());
//
// Trust: any process on the host that may open the object (its mode is 0600: the same
// user) can read and change the tensors while normd computes; see the README.
//
// Thread safety: a region may be read and written from several threads at once, as plain
// memory; keep a range stable while a request that names it is in flight.
#ifndef NORMD_CLIENT_SHARED_MEMORY_H_
#define NORMD_CLIENT_SHARED_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "normd/host_tensor.h"
#include "normd/v1/normd.pb.h"

namespace normd {

class SharedMemoryRegion {
 public:
  // Creates the object `key` (default "/normd-<pid>-<name>") of `byte_size` bytes, maps
  // it read-write and names the region `name`. The destructor unmaps and unlinks it.
  static absl::StatusOr<SharedMemoryRegion> Create(const std::string& name, size_t byte_size,
                                                   std::string key = "");
  SharedMemoryRegion(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion& operator=(SharedMemoryRegion&& other) noexcept;
  ~SharedMemoryRegion();

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  size_t size() const { return size_; }
  std::span<std::byte> bytes() const { return {static_cast<std::byte*>(data_), size_}; }

  // A reference to [offset, offset + byte_size) of this region.
  v1::SharedMemoryRef Ref(int64_t offset, int64_t byte_size) const;
  // Copies `t`'s bytes to `offset` and returns the wire tensor naming them (dtype, shape,
  // shared_memory); OUT_OF_RANGE when they do not fit.
  absl::StatusOr<v1::Tensor> Place(const HostTensor& t, int64_t offset) const;
  // A tensor of a response whose bytes the server wrote into this region: its bytes in
  // place (a view valid while the region lives), or copied into a HostTensor.
  // INVALID_ARGUMENT when the tensor names another region or lies outside this one.
  absl::StatusOr<std::span<const std::byte>> View(const v1::Tensor& t) const;
  absl::StatusOr<HostTensor> Read(const v1::Tensor& t) const;

 private:
  SharedMemoryRegion() = default;
  std::string name_, key_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A whole request moved into a region (normctl --shm and normbench --shm use these): its
// row tensors (input, residual skip, q, k) are copied to the region from `offset` on and
// named by reference, and its outputs (output, k_output, residual_sum) are directed to
// the bytes after them. SharedMemoryBytes says how many bytes that takes.
int64_t SharedMemoryBytes(const v1::NormalizeRequest& request);
absl::Status PlaceRequest(v1::NormalizeRequest* request, const SharedMemoryRegion& region,
                          int64_t offset = 0);
// Copies the response's tensors that the server wrote into `region` into their `data`, as
// if they had come on the wire (for callers that want a NormResult).
absl::Status FetchResponse(v1::NormalizeResponse* response, const SharedMemoryRegion& region);

}  // namespace normd

#endif  // NORMD_CLIENT_SHARED_MEMORY_H_
