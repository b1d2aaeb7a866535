#include "normd/kernels/cpu_backend.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace normd::kernels {

std::string CpuBackend::device() const {
#if defined(__x86_64__)
  const char* arch = "x86_64";
#elif defined(__aarch64__)
  const char* arch = "aarch64";
#else
  const char* arch = "cpu";
#endif
  return absl::StrCat(arch, ", ", std::thread::hardware_concurrency(), " cores, scalar");
}

}  // namespace normd::kernels
