// libFuzzer target: shared-memory references (Triton's system shared-memory protocol).
// The input is a region table followed by the bytes of a NormalizeRequest whose tensors
// may be SharedMemoryRefs:
//   byte 0: regions to register (0-3); per region 10 bytes: name index (r0-r3), object
//   index (two real POSIX shared-memory objects, 16384 and 5000 bytes, or a missing one),
//   offset and byte_size as little-endian int32; the rest: the request.
// The registry registers them (bounds against the object), the request is served through
// it (fuzz_service.h: reference bounds, overlap checks, the kernel reading and writing the
// mapped bytes), and then every byte of both objects outside the output ranges the
// request named must be unchanged: a kernel or a bounds check that lets a write stray is
// caught even where ASan cannot see (inside a mapping).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/fuzz/fuzz_service.h"

namespace {

struct Object {
  std::string key;
  size_t bytes;
  unsigned char* view = nullptr;  // the fuzzer's own mapping, to fill and compare
};

std::vector<Object>& Objects() {
  // Never destroyed: the atexit hook that unlinks the objects reads it after static
  // destructors may have run.
  static std::vector<Object>* objects = [] {
    std::vector<Object> made = {{absl::StrCat("/normd-fuzz-", getpid(), "-a"), 16384},
                                {absl::StrCat("/normd-fuzz-", getpid(), "-b"), 5000}};
    for (Object& o : made) {
      const int fd = shm_open(o.key.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
      FUZZ_CHECK(fd >= 0 && ftruncate(fd, static_cast<off_t>(o.bytes)) == 0, "shm_open %s",
                 o.key.c_str());
      void* m = mmap(nullptr, o.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      FUZZ_CHECK(m != MAP_FAILED, "mmap %s", o.key.c_str());
      close(fd);
      o.view = static_cast<unsigned char*>(m);
    }
    std::atexit([] {
      for (const Object& o : Objects()) shm_unlink(o.key.c_str());
    });
    return new std::vector<Object>(std::move(made));
  }();
  return *objects;
}

int32_t Int32At(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return static_cast<int32_t>(v);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  normd::fuzz::Initialize();
  Objects();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using normd::v1::SharedMemoryRef;
  std::vector<Object>& objects = Objects();
  for (Object& o : objects) {
    for (size_t i = 0; i < o.bytes; ++i) o.view[i] = static_cast<unsigned char>(i * 131 + 7);
  }
  if (size == 0) return 0;
  const int regions = data[0] % 4;
  size_t at = 1;
  normd::server::SharedMemoryRegistry registry;
  struct Registered {
    int object;
    int64_t offset;
  };
  std::map<std::string, Registered> registered;
  for (int i = 0; i < regions && at + 10 <= size; ++i, at += 10) {
    normd::v1::RegisterSharedMemoryRequest r;
    r.set_name(absl::StrCat("r", data[at] % 4));
    const int object = data[at + 1] % 3;
    r.set_key(object < 2 ? objects[object].key : "/normd-fuzz-missing");
    r.set_offset(Int32At(data + at + 2));
    r.set_byte_size(Int32At(data + at + 6));
    const absl::Status s = registry.Register(r);
    if (s.ok()) {
      FUZZ_CHECK(object < 2 && r.offset() >= 0 && r.byte_size() > 0 &&
                     static_cast<size_t>(r.offset() + r.byte_size()) <= objects[object].bytes,
                 "registered a region outside its object");
      registered[r.name()] = {object, r.offset()};
    }
  }
  normd::v1::NormalizeRequest request;
  if (!request.ParseFromArray(data + at, static_cast<int>(size - at))) return 0;
  const bool served = normd::fuzz::Serve(request, &registry);

  // Which bytes the request may have written: its output references, once served.
  std::vector<std::vector<bool>> writable;
  for (const Object& o : objects) writable.emplace_back(o.bytes, false);
  if (served) {
    for (const SharedMemoryRef* ref :
         {&request.output_shared_memory(), &request.k_output_shared_memory(),
          &request.residual_sum_shared_memory()}) {
      auto it = registered.find(ref->region());
      if (ref->region().empty() || it == registered.end()) continue;
      const int64_t from = it->second.offset + ref->offset();
      for (int64_t b = from; b < from + ref->byte_size(); ++b)
        writable[it->second.object][b] = true;
    }
  }
  for (size_t k = 0; k < objects.size(); ++k) {
    for (size_t i = 0; i < objects[k].bytes; ++i) {
      FUZZ_CHECK(writable[k][i] || objects[k].view[i] == static_cast<unsigned char>(i * 131 + 7),
                 "byte %zu of object %zu changed outside the request's outputs", i, k);
    }
  }
  return 0;
}
