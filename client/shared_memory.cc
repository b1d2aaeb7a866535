#include "normd/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "normd/requests.h"
#include "wire_size.h"

namespace normd {

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Create(const std::string& name,
                                                              size_t byte_size, std::string key) {
  if (name.empty()) return absl::InvalidArgumentError("name: expected a region name, got ''");
  if (byte_size == 0) return absl::InvalidArgumentError("byte_size: expected > 0, got 0");
  if (key.empty()) key = absl::StrCat("/normd-", getpid(), "-", name);
  // O_EXCL: never adopt (and later unlink) an object someone else made.
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm_open('", key, "'): ", std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(byte_size)) != 0) {
    const int e = errno;
    close(fd);
    shm_unlink(key.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("ftruncate('", key, "', ", byte_size, "): ", std::strerror(e)));
  }
  void* data = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (data == MAP_FAILED) {
    const int e = errno;
    shm_unlink(key.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("mmap('", key, "'): ", std::strerror(e)));
  }
  SharedMemoryRegion region;
  region.name_ = name;
  region.key_ = std::move(key);
  region.data_ = data;
  region.size_ = byte_size;
  return region;
}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegion&& other) noexcept {
  *this = std::move(other);
}

SharedMemoryRegion& SharedMemoryRegion::operator=(SharedMemoryRegion&& other) noexcept {
  if (this == &other) return *this;
  this->~SharedMemoryRegion();
  name_ = std::move(other.name_);
  key_ = std::move(other.key_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (data_ == nullptr) return;
  munmap(data_, size_);
  // The server keeps its own mapping of a still-registered region; unlinking only removes
  // the name.
  shm_unlink(key_.c_str());
  data_ = nullptr;
}

v1::SharedMemoryRef SharedMemoryRegion::Ref(int64_t offset, int64_t byte_size) const {
  v1::SharedMemoryRef ref;
  ref.set_region(name_);
  ref.set_offset(offset);
  ref.set_byte_size(byte_size);
  return ref;
}

absl::StatusOr<v1::Tensor> SharedMemoryRegion::Place(const HostTensor& t, int64_t offset) const {
  if (offset < 0 || static_cast<size_t>(offset) > size_ || t.bytes.size() > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("offset: ", t.bytes.size(), " bytes at ", offset,
                                              " do not fit region '", name_, "' of ", size_));
  }
  std::memcpy(static_cast<char*>(data_) + offset, t.bytes.data(), t.bytes.size());
  HostTensor shape_only;
  shape_only.dtype = t.dtype;
  shape_only.shape = t.shape;
  v1::Tensor out;
  ToWire(shape_only, &out);
  *out.mutable_shared_memory() = Ref(offset, static_cast<int64_t>(t.bytes.size()));
  return out;
}

absl::StatusOr<std::span<const std::byte>> SharedMemoryRegion::View(const v1::Tensor& t) const {
  const v1::SharedMemoryRef& ref = t.shared_memory();
  if (!t.has_shared_memory() || ref.region() != name_) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared_memory.region: expected '", name_, "', got '", ref.region(), "'"));
  }
  if (ref.offset() < 0 || ref.byte_size() < 0 || static_cast<size_t>(ref.offset()) > size_ ||
      static_cast<size_t>(ref.byte_size()) > size_ - ref.offset()) {
    return absl::InvalidArgumentError(absl::StrCat("shared_memory: ", ref.byte_size(), " bytes at ",
                                                   ref.offset(), " lie outside region '", name_,
                                                   "'"));
  }
  return std::span<const std::byte>(static_cast<const std::byte*>(data_) + ref.offset(),
                                    static_cast<size_t>(ref.byte_size()));
}

absl::StatusOr<HostTensor> SharedMemoryRegion::Read(const v1::Tensor& t) const {
  absl::StatusOr<std::span<const std::byte>> bytes = View(t);
  if (!bytes.ok()) return bytes.status();
  v1::Tensor shape_only;
  shape_only.set_dtype(t.dtype());
  *shape_only.mutable_shape() = t.shape();
  HostTensor out = FromWire(shape_only);
  out.bytes.assign(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  return out;
}

namespace {

// The request's row tensors (where they are) and its outputs, each with its byte size.
using TensorAt = v1::Tensor* (*)(v1::NormalizeRequest*);
using OutputAt = v1::SharedMemoryRef* (v1::NormalizeRequest::*)();
struct Placement {
  std::vector<std::pair<TensorAt, int64_t>> inputs;
  std::vector<std::pair<OutputAt, int64_t>> outputs;
};

Placement PlacementOf(const v1::NormalizeRequest& r) {
  Placement l;
  const v1::DataType out_dtype = r.output_dtype();
  auto out_bytes = [out_dtype](const v1::Tensor& t) {
    return WireBytes(out_dtype == v1::DATA_TYPE_UNSPECIFIED ? t.dtype() : out_dtype, t.shape());
  };
  auto in_bytes = [](const v1::Tensor& t) { return WireBytes(t.dtype(), t.shape()); };
  if (r.op_case() == v1::NormalizeRequest::kQkNorm) {
    const v1::QkNormParams& p = r.qk_norm();
    l.inputs = {{[](v1::NormalizeRequest* m) { return m->mutable_qk_norm()->mutable_q(); },
                 in_bytes(p.q())},
                {[](v1::NormalizeRequest* m) { return m->mutable_qk_norm()->mutable_k(); },
                 in_bytes(p.k())}};
    l.outputs = {{&v1::NormalizeRequest::mutable_output_shared_memory, out_bytes(p.q())},
                 {&v1::NormalizeRequest::mutable_k_output_shared_memory, out_bytes(p.k())}};
    return l;
  }
  l.inputs = {{[](v1::NormalizeRequest* m) { return m->mutable_input(); }, in_bytes(r.input())}};
  l.outputs = {{&v1::NormalizeRequest::mutable_output_shared_memory, out_bytes(r.input())}};
  const v1::Residual* residual = nullptr;
  if (r.op_case() == v1::NormalizeRequest::kLayerNorm && r.layer_norm().has_residual()) {
    residual = &r.layer_norm().residual();
    l.inputs.push_back({[](v1::NormalizeRequest* m) {
                          return m->mutable_layer_norm()->mutable_residual()->mutable_skip();
                        },
                        in_bytes(residual->skip())});
  } else if (r.op_case() == v1::NormalizeRequest::kRmsNorm && r.rms_norm().has_residual()) {
    residual = &r.rms_norm().residual();
    l.inputs.push_back({[](v1::NormalizeRequest* m) {
                          return m->mutable_rms_norm()->mutable_residual()->mutable_skip();
                        },
                        in_bytes(residual->skip())});
  }
  if (residual != nullptr && residual->return_sum()) {
    l.outputs.push_back(
        {&v1::NormalizeRequest::mutable_residual_sum_shared_memory, in_bytes(r.input())});
  }
  return l;
}

}  // namespace

int64_t SharedMemoryBytes(const v1::NormalizeRequest& request) {
  int64_t n = 0;
  const Placement l = PlacementOf(request);
  for (const auto& [at, bytes] : l.inputs) n += bytes;
  for (const auto& [at, bytes] : l.outputs) n += bytes;
  return n;
}

absl::Status PlaceRequest(v1::NormalizeRequest* request, const SharedMemoryRegion& region,
                          int64_t offset) {
  const Placement l = PlacementOf(*request);
  for (const auto& [at, shape_bytes] : l.inputs) {
    v1::Tensor* t = at(request);
    const int64_t bytes = static_cast<int64_t>(t->data().size());
    // Its bytes go straight from the message into the region.
    if (offset < 0 || offset + bytes > static_cast<int64_t>(region.size())) {
      return absl::OutOfRangeError(absl::StrCat("the inputs do not fit region '", region.name(),
                                                "' of ", region.size(), " bytes"));
    }
    std::memcpy(region.bytes().data() + offset, t->data().data(), static_cast<size_t>(bytes));
    t->clear_data();
    *t->mutable_shared_memory() = region.Ref(offset, bytes);
    offset += bytes;
  }
  for (const auto& [at, bytes] : l.outputs) {
    if (offset < 0 || offset + bytes > static_cast<int64_t>(region.size())) {
      return absl::OutOfRangeError(absl::StrCat("the outputs do not fit region '", region.name(),
                                                "' of ", region.size(), " bytes"));
    }
    *(request->*at)() = region.Ref(offset, bytes);
    offset += bytes;
  }
  return absl::OkStatus();
}

absl::Status FetchResponse(v1::NormalizeResponse* response, const SharedMemoryRegion& region) {
  for (auto [has, at] :
       {std::pair{response->has_output(), &v1::NormalizeResponse::mutable_output},
        {response->has_k_output(), &v1::NormalizeResponse::mutable_k_output},
        {response->has_residual_sum(), &v1::NormalizeResponse::mutable_residual_sum}}) {
    if (!has || !(response->*at)()->has_shared_memory()) continue;
    v1::Tensor* t = (response->*at)();
    absl::StatusOr<std::span<const std::byte>> bytes = region.View(*t);
    if (!bytes.ok()) return bytes.status();
    t->set_data(bytes->data(), bytes->size());
    t->clear_shared_memory();
  }
  return absl::OkStatus();
}

}  // namespace normd
