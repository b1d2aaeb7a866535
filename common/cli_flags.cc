#include "normd/common/cli_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace normd {

absl::Status CliFlags::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto it = known_.find(name);
    if (it == known_.end())
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (it->second) {
      if (value && *value != "true" && *value != "1") {
        if (*value == "false" || *value == "0") continue;
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      values_[name] = "true";
      continue;
    }
    if (!value) {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    values_[name] = *value;
  }
  return absl::OkStatus();
}

std::string CliFlags::GetString(const std::string& name, const std::string& fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::optional<std::string> CliFlags::Find(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<int64_t> CliFlags::GetInt(const std::string& name, int64_t fallback) const {
  const auto v = Find(name);
  if (!v) return fallback;
  int64_t out;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected an integer, got '", *v, "'"));
  }
  return out;
}

absl::StatusOr<std::optional<double>> CliFlags::FindDouble(const std::string& name) const {
  const auto v = Find(name);
  if (!v) return std::optional<double>();
  double out;
  if (!absl::SimpleAtod(*v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected a number, got '", *v, "'"));
  }
  return std::optional<double>(out);
}

absl::StatusOr<double> CliFlags::GetDouble(const std::string& name, double fallback) const {
  absl::StatusOr<std::optional<double>> v = FindDouble(name);
  if (!v.ok()) return v.status();
  return v->value_or(fallback);
}

}  // namespace normd
