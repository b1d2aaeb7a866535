// normd's logs, on spdlog: the level, the format (text, or json: one object a line) and
// the access log. Access lines (logger "access", at debug) carry a request's id, op, dtype,
// shape, bytes, code, latency and peer, never tensor data, tokens or keys; in json they
// are fields of the line's object. A summary line at info every interval sums up what was
// served (log_summary.h).
//
// Thread safety: ConfigureLogging once in main, before other threads log; the loggers are
// spdlog's, safe from any thread.
#ifndef NORMD_SERVER_LOGGING_H_
#define NORMD_SERVER_LOGGING_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace normd::server {

// level: trace|debug|info|warn|error; format: text|json.
absl::Status ConfigureLogging(absl::string_view level, absl::string_view format);

// Whether access lines are written (the access logger is at debug or below).
bool AccessLogEnabled();

// One access line: ordered key/value pairs (values are written as JSON strings, or as
// key=value in text).
void LogAccess(const std::vector<std::pair<absl::string_view, std::string>>& fields);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

}  // namespace normd::server

#endif  // NORMD_SERVER_LOGGING_H_
