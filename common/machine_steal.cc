#include "normd/common/machine_steal.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace normd {

std::optional<absl::Duration> MachineStealTime() {
  // First line: "cpu  user nice system idle iowait irq softirq steal guest guest_nice",
  // in clock ticks.
  std::ifstream in("/proc/stat");
  std::string label;
  long long field[8];
  if (!(in >> label) || label != "cpu") return std::nullopt;
  for (long long& v : field) {
    if (!(in >> v)) return std::nullopt;
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return std::nullopt;
  return absl::Seconds(static_cast<double>(field[7]) / static_cast<double>(ticks));
}

int64_t StealMs(std::optional<absl::Duration> before, std::optional<absl::Duration> after) {
  if (!before || !after) return -1;
  return absl::ToInt64Milliseconds(*after - *before);
}

}  // namespace normd
