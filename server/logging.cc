#include "server/logging.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace normd::server {
namespace {

constexpr char kAccessLogger[] = "access";

// One JSON object a line: time (RFC 3339, UTC, microseconds), level, logger, and either the
// message, or for the access logger the line's own fields.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const absl::string_view payload(msg.payload.data(), msg.payload.size());
    const absl::string_view logger(msg.logger_name.data(), msg.logger_name.size());
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    std::string line = absl::StrCat(
        "{\"time\":\"",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromChrono(msg.time), absl::UTCTimeZone()),
        "\",\"level\":\"", absl::string_view(level.data(), level.size()),
        "\",\"logger\":", JsonQuote(logger.empty() ? "normd" : logger), ",");
    if (logger == kAccessLogger) {
      absl::StrAppend(&line, payload, "}\n");  // already `"key":"value",...`
    } else {
      absl::StrAppend(&line, "\"msg\":", JsonQuote(payload), "}\n");
    }
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

bool json_format = false;  // set once by ConfigureLogging, before other threads log

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

absl::Status ConfigureLogging(absl::string_view level, absl::string_view format) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("log-level: unknown level '", level, "'"));
  }
  spdlog::sink_ptr sink;
  if (format == "json") {
    json_format = true;
    sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    sink->set_formatter(std::make_unique<JsonFormatter>());
  } else if (format == "text") {
    sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
    sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  } else {
    return absl::InvalidArgumentError(absl::StrCat("log-format: unknown format '", format, "'"));
  }
  auto main = std::make_shared<spdlog::logger>("normd", sink);
  auto access = std::make_shared<spdlog::logger>(kAccessLogger, sink);
  spdlog::drop_all();
  spdlog::register_logger(access);
  spdlog::set_default_logger(main);
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::info);
  // Debug access lines are not flushed one by one; a pipe (kubectl logs) sees them within
  // a second anyway.
  spdlog::flush_every(std::chrono::seconds(1));
  return absl::OkStatus();
}

bool AccessLogEnabled() {
  static const std::shared_ptr<spdlog::logger> access = spdlog::get(kAccessLogger);
  return access != nullptr && access->should_log(spdlog::level::debug);
}

void LogAccess(const std::vector<std::pair<absl::string_view, std::string>>& fields) {
  static const std::shared_ptr<spdlog::logger> access = spdlog::get(kAccessLogger);
  if (access == nullptr) return;
  std::string line;
  for (const auto& [key, value] : fields) {
    if (json_format) {
      absl::StrAppend(&line, line.empty() ? "" : ",", JsonQuote(key), ":", JsonQuote(value));
    } else {
      absl::StrAppend(&line, line.empty() ? "" : " ", key, "=", value);
    }
  }
  access->debug("{}", line);
}

}  // namespace normd::server
