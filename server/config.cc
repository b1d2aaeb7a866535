#include "server/config.h"

#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "normd/common/channel_args.h"
#include "normd/common/cli_flags.h"

namespace normd::server {
namespace {

constexpr int64_t kMax = int64_t{1} << 50;

enum class Kind { kInt, kSize, kDuration, kBool, kString, kChoice, kChannelArgs };

// A parsed value; the member the flag's kind names is set.
struct Value {
  int64_t i = 0;
  absl::Duration d;
  bool b = false;
  std::string s;
};

struct Flag {
  const char* name;
  Kind kind;
  const char* default_text;  // the default, as it would be written; parsed like a value
  const char* help;
  std::function<void(const Value&, ServerConfig*)> set;
  int64_t lo = 0, hi = kMax;  // kInt, kSize: the accepted range
  const char* choices = "";   // kChoice: "a|b|c"
};

// Every flag of normd, in the order --help lists them.
const std::vector<Flag>& Flags() {
  static const auto* flags = new std::vector<Flag>{
      {"listen", Kind::kString, "0.0.0.0:50051", "address to serve gRPC on (port 0 picks one)",
       [](const Value& v, ServerConfig* c) { c->server.listen = v.s; }},
      {"max-message-bytes", Kind::kSize, "256MiB",
       "largest request or response message; larger: RESOURCE_EXHAUSTED",
       [](const Value& v, ServerConfig* c) { c->server.max_message_bytes = v.i; }, 1, INT32_MAX},
      {"cpu-threads", Kind::kInt, "0", "CPU backend worker threads; 0: every core",
       [](const Value& v, ServerConfig* c) { c->server.cpu_threads = static_cast<int>(v.i); }, 0,
       1024},
      {"transport-threads", Kind::kInt, "0",
       "threads polling gRPC's completion queues; 0: a quarter of the cores, at least 1",
       [](const Value& v, ServerConfig* c) { c->server.transport_threads = static_cast<int>(v.i); },
       0, 256},
      {"max-queue-requests", Kind::kInt, "1024", "requests queued per backend before UNAVAILABLE",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.max_queue_requests = v.i; }, 1},
      {"max-queue-bytes", Kind::kSize, "1GiB", "bytes queued per backend before UNAVAILABLE",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.max_queue_bytes = v.i; }, 1},
      {"max-memory", Kind::kSize, "0",
       "memory budget of requests in progress, gRPC's buffers included; beyond it calls wait "
       "or get RESOURCE_EXHAUSTED; 0: half the container's memory limit, or the machine's",
       [](const Value& v, ServerConfig* c) { c->server.max_memory = v.i; }, 0},
      {"batch-max-rows", Kind::kInt, "8192",
       "rows one batched backend run may hold; 1 turns batching off",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.batch_max_rows = v.i; }, 1},
      {"batch-max-bytes", Kind::kSize, "16MiB", "bytes one batched backend run may hold",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.batch_max_bytes = v.i; }, 1},
      {"batch-max-delay", Kind::kDuration, "0s", "how long a CPU batch waits for batchmates",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.cpu_batch_max_delay = v.d; }},
      {"cuda-batch-max-delay", Kind::kDuration, "0s", "how long a CUDA batch waits for batchmates",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.cuda_batch_max_delay = v.d; }},
      {"cuda-min-bytes", Kind::kSize, "1MiB",
       "automatic routing sends inputs of at least this size to CUDA",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.cuda_min_bytes = v.i; }},
      {"inline-max-bytes", Kind::kSize, "1MiB",
       "CPU work up to this size runs on the transport thread when the queue is empty; 0: never",
       [](const Value& v, ServerConfig* c) { c->server.scheduler.inline_max_bytes = v.i; }},
      {"stream-window", Kind::kInt, "64", "requests of one stream in flight at once",
       [](const Value& v, ServerConfig* c) { c->server.stream_window = static_cast<int>(v.i); }, 1,
       65536},
      {"no-cuda", Kind::kBool, "false", "serve from the CPU only, even with a GPU present",
       [](const Value& v, ServerConfig* c) { c->server.enable_cuda = !v.b; }},
      {"no-shared-memory", Kind::kBool, "false",
       "refuse tensors in shared memory (RegisterSharedMemory: UNIMPLEMENTED)",
       [](const Value& v, ServerConfig* c) { c->server.enable_shared_memory = !v.b; }},
      {"no-diagnostics", Kind::kBool, "false",
       "do not serve normd.v1.DiagnosticsService (Echo, EchoStream)",
       [](const Value& v, ServerConfig* c) { c->server.enable_diagnostics = !v.b; }},
      {"drain-delay", Kind::kDuration, "0s",
       "after SIGTERM: health NOT_SERVING, keep serving this long before closing",
       [](const Value& v, ServerConfig* c) { c->drain_delay = v.d; }},
      {"shutdown-timeout", Kind::kDuration, "10s",
       "after the drain delay: how long accepted calls may take to finish",
       [](const Value& v, ServerConfig* c) { c->shutdown_timeout = v.d; }},
      {"metrics-listen", Kind::kString, "",
       "HOST:PORT of the Prometheus /metrics endpoint; empty: off",
       [](const Value& v, ServerConfig* c) { c->metrics_listen = v.s; }},
      {"log-level", Kind::kChoice, "info", "least severe level logged",
       [](const Value& v, ServerConfig* c) { c->log_level = v.s; }, 0, 0,
       "trace|debug|info|warn|error"},
      {"log-format", Kind::kChoice, "text", "text, or json (one object a line)",
       [](const Value& v, ServerConfig* c) { c->log_format = v.s; }, 0, 0, "text|json"},
      {"tls-cert", Kind::kString, "",
       "PEM certificate chain to serve TLS with (with --tls-key); empty: plaintext",
       [](const Value& v, ServerConfig* c) { c->server.tls.cert_file = v.s; }},
      {"tls-key", Kind::kString, "", "PEM private key of --tls-cert",
       [](const Value& v, ServerConfig* c) { c->server.tls.key_file = v.s; }},
      {"tls-client-ca", Kind::kString, "",
       "PEM CA bundle: mutual TLS, every client must present a certificate it signed",
       [](const Value& v, ServerConfig* c) { c->server.tls.client_ca_file = v.s; }},
      {"auth-token-file", Kind::kString, "",
       "file of accepted bearer tokens, one a line; set: normd's services require one",
       [](const Value& v, ServerConfig* c) { c->server.auth_token_file = v.s; }},
      {"reload-interval", Kind::kDuration, "10s",
       "how often the TLS and token files are checked for changes",
       [](const Value& v, ServerConfig* c) { c->server.reload_interval = v.d; }},
      {"max-concurrent-streams", Kind::kInt, "128", "calls in flight per client connection",
       [](const Value& v, ServerConfig* c) {
         c->server.connections.max_concurrent_streams = static_cast<int>(v.i);
       },
       1, INT32_MAX},
      {"grpc-args", Kind::kChannelArgs, "",
       "more gRPC channel arguments, NAME=INTEGER comma-separated (transport tuning)",
       [](const Value& v, ServerConfig* c) {
         c->server.connections.grpc_args = *ParseChannelArgs(v.s);
       }},
      {"keepalive-time", Kind::kDuration, "2h", "the server pings a connection idle this long",
       [](const Value& v, ServerConfig* c) { c->server.connections.keepalive_time = v.d; }},
      {"keepalive-timeout", Kind::kDuration, "20s",
       "a connection whose ping is unanswered this long is closed",
       [](const Value& v, ServerConfig* c) { c->server.connections.keepalive_timeout = v.d; }},
      {"keepalive-min-ping-interval", Kind::kDuration, "10s",
       "clients may ping at most this often (more: GOAWAY too_many_pings)",
       [](const Value& v, ServerConfig* c) { c->server.connections.min_ping_interval = v.d; }},
      {"keepalive-permit-without-calls", Kind::kBool, "true",
       "accept client pings on a connection with no call in flight",
       [](const Value& v, ServerConfig* c) {
         c->server.connections.permit_pings_without_calls = v.b;
       }},
      {"max-connection-age", Kind::kDuration, "0s",
       "close connections this old (GOAWAY) so clients rebalance across replicas; 0s: never",
       [](const Value& v, ServerConfig* c) { c->server.connections.max_connection_age = v.d; }},
      {"max-connection-age-grace", Kind::kDuration, "0s",
       "calls on an aged connection may take this long to finish; 0s: unlimited",
       [](const Value& v, ServerConfig* c) {
         c->server.connections.max_connection_age_grace = v.d;
       }},
      {"max-connection-idle", Kind::kDuration, "0s",
       "close connections without calls for this long; 0s: never",
       [](const Value& v, ServerConfig* c) { c->server.connections.max_connection_idle = v.d; }},
      {"log-summary-interval", Kind::kDuration, "60s",
       "how often an info line sums up the requests served; 0s: never",
       [](const Value& v, ServerConfig* c) { c->log_summary_interval = v.d; }},
  };
  return *flags;
}

std::string EnvName(absl::string_view flag) {
  return absl::StrCat("NORMD_", absl::AsciiStrToUpper(absl::StrReplaceAll(flag, {{"-", "_"}})));
}

absl::StatusOr<Value> ParseValue(const Flag& f, const std::string& text) {
  Value v;
  auto range_error = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", f.kind == Kind::kSize ? "a size" : "an integer", " from ", f.lo,
                     " to ", f.hi, ", got '", text, "'"));
  };
  switch (f.kind) {
    case Kind::kInt:
      if (!absl::SimpleAtoi(text, &v.i) || v.i < f.lo || v.i > f.hi) return range_error();
      return v;
    case Kind::kSize: {
      absl::StatusOr<int64_t> bytes = ParseSize(text);
      if (!bytes.ok()) return bytes.status();
      v.i = *bytes;
      if (v.i < f.lo || v.i > f.hi) return range_error();
      return v;
    }
    case Kind::kDuration:
      if (!absl::ParseDuration(text, &v.d) || v.d < absl::ZeroDuration() ||
          v.d == absl::InfiniteDuration()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "expected a duration >= 0 with its unit (e.g. 500ms, 2s, 1m30s), got '", text, "'"));
      }
      return v;
    case Kind::kBool:
      if (text == "true" || text == "1") {
        v.b = true;
      } else if (text != "false" && text != "0") {
        return absl::InvalidArgumentError(
            absl::StrCat("expected true, false, 1 or 0, got '", text, "'"));
      }
      return v;
    case Kind::kString:
      v.s = text;
      return v;
    case Kind::kChannelArgs:
      if (absl::Status s = ParseChannelArgs(text).status(); !s.ok()) return s;
      v.s = text;
      return v;
    case Kind::kChoice:
      for (absl::string_view choice : absl::StrSplit(f.choices, '|')) {
        if (choice == text) {
          v.s = text;
          return v;
        }
      }
      return absl::InvalidArgumentError(
          absl::StrCat("expected one of ", f.choices, ", got '", text, "'"));
  }
  return v;
}

}  // namespace

absl::StatusOr<int64_t> ParseSize(absl::string_view text) {
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  int64_t unit = 1;
  for (const auto& [suffix, scale] :
       {std::pair{"KiB", int64_t{1} << 10}, std::pair{"MiB", int64_t{1} << 20},
        std::pair{"GiB", int64_t{1} << 30}}) {
    if (absl::ConsumeSuffix(&digits, suffix)) {
      unit = scale;
      break;
    }
  }
  int64_t n = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &n) || n < 0 ||
      __builtin_mul_overflow(n, unit, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a size in bytes, or with KiB, MiB or GiB (e.g. 64MiB), got '", text, "'"));
  }
  return n;
}

absl::StatusOr<ServerConfig> ParseConfig(int argc, char** argv, char** envp) {
  std::map<std::string, bool> known{{"help", true}};
  for (const Flag& f : Flags()) known[f.name] = f.kind == Kind::kBool;
  CliFlags flags(known);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return s;
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional().front(), "'"));
  }
  std::map<std::string, std::string> env;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "NORMD_", 6) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  ServerConfig config;
  config.help = flags.GetBool("help");
  for (const Flag& f : Flags()) {
    const std::string var = EnvName(f.name);
    std::string text = f.default_text, from = "default";
    if (flags.Has(f.name)) {
      text = flags.GetString(f.name);
      from = absl::StrCat("--", f.name);
    } else if (auto it = env.find(var); it != env.end()) {
      text = it->second;
      from = var;
    }
    absl::StatusOr<Value> v = ParseValue(f, text);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(from == "default" ? absl::StrCat("--", f.name, " default") : from, ": ",
                       v.status().message()));
    }
    f.set(*v, &config);
  }
  return config;
}

std::string ConfigHelp() {
  std::string out =
      "usage: normd [flags]\n"
      "Every flag can also be set in the environment as NORMD_<FLAG> (the flag wins).\n"
      "Durations take units (500ms, 2s); sizes take bytes or KiB, MiB, GiB.\n\n";
  for (const Flag& f : Flags()) {
    const char* kind = f.kind == Kind::kInt        ? "N"
                       : f.kind == Kind::kSize     ? "SIZE"
                       : f.kind == Kind::kDuration ? "DURATION"
                       : f.kind == Kind::kBool     ? ""
                       : f.kind == Kind::kChoice   ? f.choices
                                                   : "TEXT";
    absl::StrAppend(&out, "  --", f.name, *kind ? " " : "", kind, "\n      ", f.help,
                    "\n      default: ", *f.default_text ? f.default_text : "(empty)",
                    "; variable: ", EnvName(f.name), "\n");
  }
  absl::StrAppend(&out, "  --help\n      this text\n");
  return out;
}

}  // namespace normd::server
