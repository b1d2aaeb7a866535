// libFuzzer target: normctl's .npy reader (client/npy.h), which reads files a user points
// it at. The input is a file's bytes. A file it accepts must be a consistent tensor (its
// bytes exactly shape's elements) that writes back and reads again to the same tensor.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/npy.h"
#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<normd::HostTensor> t = normd::ParseNpy(bytes, "fuzz.npy");
  if (!t.ok()) {
    FUZZ_CHECK(
        t.status().code() == absl::StatusCode::kInvalidArgument && !t.status().message().empty(),
        "%s", t.status().ToString().c_str());
    return 0;
  }
  int64_t numel = 1;
  for (int64_t d : t->shape) {
    FUZZ_CHECK(d >= 0, "negative dimension %lld", static_cast<long long>(d));
    numel *= d;
  }
  const int64_t elem = t->dtype == normd::DType::kF32 ? 4 : 2;
  FUZZ_CHECK(static_cast<int64_t>(t->bytes.size()) == numel * elem, "%zu bytes for %lld elements",
             t->bytes.size(), static_cast<long long>(numel));
  absl::StatusOr<normd::HostTensor> again = normd::ParseNpy(normd::SerializeNpy(*t), "again");
  FUZZ_CHECK(again.ok(), "its own output does not read: %s", again.status().ToString().c_str());
  if (t->dtype != normd::DType::kBF16) {  // BF16 is written as f4 (exact, but widened)
    FUZZ_CHECK(again->dtype == t->dtype && again->shape == t->shape && again->bytes == t->bytes,
               "the round trip changed the tensor");
  }
  return 0;
}
