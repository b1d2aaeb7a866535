// Command-line flags for normd's programs: `--name=value`, `--name value`, boolean
// `--name`, and positional arguments. absl's flags library would be the first choice, but
// its flag names must be C++ identifiers and our interface uses dashed names
// (--max-message-bytes, --eps-placement), so this small parser sits in front.
// Not thread-safe; parse once in main.
//
//   CliFlags flags({{"listen", false}, {"verbose", true}});
//   absl::Status s = flags.Parse(argc, argv);
//   std::string addr = flags.GetString("listen", "0.0.0.0:50051");
#ifndef NORMD_COMMON_CLI_FLAGS_H_
#define NORMD_COMMON_CLI_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace normd {

class CliFlags {
 public:
  // known: flag name (without dashes) -> whether it is boolean (takes no value).
  explicit CliFlags(std::map<std::string, bool> known) : known_(std::move(known)) {}

  // Unknown flags and missing values give INVALID_ARGUMENT naming the flag.
  absl::Status Parse(int argc, char** argv);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  bool GetBool(const std::string& name) const { return Has(name); }
  std::string GetString(const std::string& name, const std::string& fallback = "") const;
  std::optional<std::string> Find(const std::string& name) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  absl::StatusOr<std::optional<double>> FindDouble(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, bool> known_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace normd

#endif  // NORMD_COMMON_CLI_FLAGS_H_
