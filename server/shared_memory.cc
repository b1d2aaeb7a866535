#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "server/field_error.h"

namespace normd::server {

SharedMemoryRegion::~SharedMemoryRegion() {
  if (mapping != nullptr) munmap(mapping, mapping_bytes);
}

absl::Status SharedMemoryRegistry::Register(const v1::RegisterSharedMemoryRequest& r) {
  if (r.name().empty() || r.name().size() > 128) {
    return InvalidField("name", "expected 1 to 128 characters, got ", r.name().size());
  }
  // shm_open's portable form: one slash, leading; no path to wander off with.
  if (r.key().size() < 2 || r.key().size() > 255 || r.key()[0] != '/' ||
      r.key().find('/', 1) != std::string::npos) {
    return InvalidField("key", "expected a shared-memory object name \"/name\", got '", r.key(),
                        "'");
  }
  if (r.offset() < 0) return InvalidField("offset", "expected >= 0, got ", r.offset());
  if (r.byte_size() <= 0) return InvalidField("byte_size", "expected > 0, got ", r.byte_size());
  {
    absl::MutexLock l(&mu_);
    if (regions_.count(r.name()) > 0) {
      return FieldError(absl::StatusCode::kAlreadyExists, "name",
                        absl::StrCat("a region named '", r.name(), "' is registered already"));
    }
    if (regions_.size() >= kMaxRegions) {
      return FieldError(absl::StatusCode::kResourceExhausted, "name",
                        absl::StrCat("at most ", kMaxRegions, " regions may be registered"));
    }
  }
  const int fd = shm_open(r.key().c_str(), O_RDWR, 0);
  if (fd < 0) {
    return FieldError(
        errno == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInvalidArgument, "key",
        absl::StrCat("cannot open '", r.key(), "': ", std::strerror(errno)));
  }
  struct stat st {};
  int64_t end = 0;
  if (fstat(fd, &st) != 0 || __builtin_add_overflow(r.offset(), r.byte_size(), &end) ||
      end > st.st_size) {
    close(fd);
    return InvalidField("byte_size", "expected offset + byte_size within the object's ",
                        static_cast<int64_t>(st.st_size), " bytes, got ", r.offset(), " + ",
                        r.byte_size());
  }
  // mmap's offset must be page-aligned: map from the page below the region's start.
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t map_from = r.offset() / page * page;
  auto region = std::make_shared<SharedMemoryRegion>();
  region->mapping_bytes = static_cast<size_t>(end - map_from);
  void* m = mmap(nullptr, region->mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, map_from);
  close(fd);
  if (m == MAP_FAILED) {
    return FieldError(absl::StatusCode::kInvalidArgument, "key",
                      absl::StrCat("cannot map '", r.key(), "': ", std::strerror(errno)));
  }
  region->mapping = m;
  region->base = static_cast<char*>(m) + (r.offset() - map_from);
  region->name = r.name();
  region->key = r.key();
  region->offset = r.offset();
  region->byte_size = r.byte_size();
  absl::MutexLock l(&mu_);
  if (!regions_.emplace(r.name(), std::move(region)).second) {  // a racing registration
    return FieldError(absl::StatusCode::kAlreadyExists, "name",
                      absl::StrCat("a region named '", r.name(), "' is registered already"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Unregister(const std::string& name) {
  absl::MutexLock l(&mu_);
  if (name.empty()) {
    regions_.clear();
    return absl::OkStatus();
  }
  if (regions_.erase(name) == 0) {
    return FieldError(absl::StatusCode::kNotFound, "name",
                      absl::StrCat("no region named '", name, "' is registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SharedMemoryStatusResponse> SharedMemoryRegistry::Status(
    const std::string& name) const {
  v1::SharedMemoryStatusResponse out;
  absl::MutexLock l(&mu_);
  for (const auto& [n, region] : regions_) {
    if (!name.empty() && n != name) continue;
    v1::SharedMemoryRegion* r = out.add_regions();
    r->set_name(region->name);
    r->set_key(region->key);
    r->set_offset(region->offset);
    r->set_byte_size(region->byte_size);
    r->set_requests_in_flight(region.use_count() - 1);  // every holder but the registry
  }
  if (!name.empty() && out.regions_size() == 0) {
    return FieldError(absl::StatusCode::kNotFound, "name",
                      absl::StrCat("no region named '", name, "' is registered"));
  }
  return out;
}

std::shared_ptr<const SharedMemoryRegion> SharedMemoryRegistry::Find(
    const std::string& name) const {
  absl::MutexLock l(&mu_);
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : it->second;
}

absl::StatusOr<char*> SharedMemoryAccess::Resolve(const v1::SharedMemoryRef& ref,
                                                  const std::string& field, int64_t want_bytes,
                                                  std::vector<Range>* ranges) {
  if (registry_ == nullptr) {
    return InvalidField(field,
                        "expected no shared-memory reference: this server runs with "
                        "--no-shared-memory");
  }
  std::shared_ptr<const SharedMemoryRegion> found = registry_->Find(ref.region());
  if (found == nullptr) {
    return InvalidField(field + ".region", "expected a registered region, got '", ref.region(),
                        "', which is not registered (RegisterSharedMemory; a restarted "
                        "server has forgotten its regions)");
  }
  const SharedMemoryRegion* region = found.get();
  // Held once per request: SharedMemoryStatus counts requests by the holders.
  if (absl::c_none_of(held_, [region](const auto& h) { return h.get() == region; })) {
    held_.push_back(std::move(found));
  }
  if (ref.byte_size() != want_bytes) {
    return InvalidField(field + ".byte_size", "expected ", want_bytes,
                        " (the tensor's bytes), got ", ref.byte_size());
  }
  int64_t end = 0;
  if (ref.offset() < 0 || __builtin_add_overflow(ref.offset(), ref.byte_size(), &end) ||
      end > region->byte_size) {
    return InvalidField(field + ".offset", "expected offset + byte_size within region '",
                        region->name, "' of ", region->byte_size, " bytes, got ", ref.offset(),
                        " + ", ref.byte_size());
  }
  ranges->push_back({region, ref.offset(), ref.byte_size(), field});
  return region->base + ref.offset();
}

absl::StatusOr<const void*> SharedMemoryAccess::Input(const v1::SharedMemoryRef& ref,
                                                      const std::string& field,
                                                      int64_t want_bytes) {
  absl::StatusOr<char*> p = Resolve(ref, field, want_bytes, &inputs_);
  if (!p.ok()) return p.status();
  return static_cast<const void*>(*p);
}

absl::StatusOr<void*> SharedMemoryAccess::Output(const v1::SharedMemoryRef& ref,
                                                 const std::string& field, int64_t want_bytes) {
  absl::StatusOr<char*> p = Resolve(ref, field, want_bytes, &outputs_);
  if (!p.ok()) return p.status();
  return static_cast<void*>(*p);
}

absl::Status SharedMemoryAccess::CheckOverlaps(bool in_place_ok) const {
  // By the object and the absolute offset in it: two regions may map the same object.
  auto start = [](const Range& r) { return r.region->offset + r.offset; };
  auto overlap = [&start](const Range& a, const Range& b) {
    return a.region->key == b.region->key && a.bytes > 0 && b.bytes > 0 &&
           start(a) < start(b) + b.bytes && start(b) < start(a) + a.bytes;
  };
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Range& out = outputs_[i];
    for (size_t j = 0; j < i; ++j) {
      if (overlap(out, outputs_[j])) {
        return InvalidField(out.field, "expected a range apart from ", outputs_[j].field,
                            ", got an overlapping one");
      }
    }
    for (const Range& in : inputs_) {
      if (!overlap(out, in)) continue;
      // In place: a row op's output exactly over its own input (each row is read whole
      // before its output is written); never over a parameter, the skip or the other of
      // q and k.
      const bool exact = start(out) == start(in) && out.bytes == in.bytes;
      const bool own_input =
          (out.field == "output_shared_memory" &&
           (in.field == "input.shared_memory" || in.field == "qk_norm.q.shared_memory")) ||
          (out.field == "k_output_shared_memory" && in.field == "qk_norm.k.shared_memory");
      if (in_place_ok && exact && own_input) continue;
      return InvalidField(out.field, "expected a range apart from ", in.field,
                          in_place_ok ? " (or exactly on the op's input, in place)" : "",
                          ", got an overlapping one");
    }
  }
  return absl::OkStatus();
}

}  // namespace normd::server
