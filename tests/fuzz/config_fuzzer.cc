// libFuzzer target: normd's configuration parser (server/config.h): flags, environment
// variables, durations and sizes, as an operator's manifest or shell gives them. The input
// is NUL-separated strings; the first byte says how many of them are argv (after the
// program name), the rest are "NAME=value" environment entries. Accepted or not, the parse
// must answer: OK, or INVALID_ARGUMENT with a message. ParseSize is also fed each string.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/config.h"
#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t argc_wanted = data[0] % 16;
  std::vector<std::string> strings;
  std::string current;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0) {
      strings.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  strings.push_back(current);
  std::vector<char*> argv = {const_cast<char*>("normd")}, envp;
  for (size_t i = 0; i < strings.size(); ++i) {
    (i < argc_wanted ? argv : envp).push_back(strings[i].data());
  }
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  absl::StatusOr<normd::server::ServerConfig> config =
      normd::server::ParseConfig(static_cast<int>(argv.size() - 1), argv.data(), envp.data());
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument &&
                   !config.status().message().empty(),
               "%s", config.status().ToString().c_str());
  }
  for (const std::string& s : strings) {
    absl::StatusOr<int64_t> bytes = normd::server::ParseSize(s);
    if (bytes.ok())
      FUZZ_CHECK(*bytes >= 0, "size '%s' parsed as %lld", s.c_str(),
                 static_cast<long long>(*bytes));
  }
  return 0;
}
