// normbench: a load generator for normd, in the manner of ghz and perf_analyzer.
//
// What it sends: any op with its options, random inputs from --seed, or a weighted --mix
// of kinds (client/load/workload.h). How: closed loop (--concurrency callers, each with
// one request in flight; a sweep 1:256:x2 runs each level in turn) or open loop (--rate
// requests/s on a constant or Poisson schedule, latency from the intended send time), unary
// or --stream, over --connections channels to any gRPC target (round_robin over its
// addresses). How long: --duration, --requests, or by default measurement windows that
// repeat until the last three agree within 10% (--window, --max-windows), after --warmup.
// What it reports: counts, status codes, retried attempts, answers per replica, --verify
// mismatches against the local float64 reference, throughput in requests/s and GB/s,
// latency percentiles from a histogram within 1%, a per-second series; a table on stdout,
// a progress line on a terminal, --json and --csv files. --compare runs Normalize and Echo
// back to back on the same workload and prints the ratio.
//
// Exit status: 0 when every call succeeded (and verified), 1 otherwise, 2 for bad flags.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "credential_flags.h"
#include "normbench_report.h"
#include "normbench_run.h"
#include "normd/client.h"
#include "normd/common/cli_flags.h"
#include "normd/common/machine_steal.h"
#include "normd/common/process_tuning.h"
#include "normd/common/status_macros.h"
#include "normd/load/load_gen.h"
#include "normd/load/workload.h"

namespace normd {
namespace {

constexpr char kUsage[] =
    R"(usage: normbench [--target TARGET] [workload flags | --mix FILE] [load flags] [report flags]
target:
  --target T        any gRPC target (default localhost:50051); several addresses
                    (ipv4:A:P,B:P or dns:///name:port) are balanced round_robin
  --connections N   channels, each its own connection; calls take turns (default 1)
  --max-attempts N  attempts per call, 1 to 5: UNAVAILABLE is retried on the next address
                    with backoff (default 5; 1: never)
  --timeout-ms MS   deadline of each call (default 30000)
load:
  --concurrency C   closed loop: C callers, each with one request in flight; a sweep
                    A:B:xF (multiply) or A:B:+S (add) runs each level (default 1)
  --rate R          open loop: R requests/s in all (a sweep as above), at most
                    --concurrency in flight (unary) or --concurrency streams (--stream)
  --arrival constant|poisson   the open loop's gaps (default constant)
  --stream          NormalizeStream instead of unary calls
  --echo            Echo (the transport alone) instead of Normalize
  --compare         Normalize, then Echo, on the same workload: prints the ratio
  --duration D      measure for D (seconds, or 500ms, 2m)
  --requests N      measure N requests
  --window D        without --duration/--requests: windows of D (default 5s) repeat until
                    the last three throughputs agree within 10%, up to --max-windows (10)
  --warmup W        before measuring: W as a time (2s, 500ms) or a request count (100);
                    its answers are not counted (default 1s)
  --seed N          of the random inputs and of the --mix choice (default 1)
  --verify          check every answer against the local float64 reference
  --shm             tensors in POSIX shared memory registered with normd (same host), not
                    on the wire; answers carry metadata only
report:
  --json FILE --csv FILE   the report as JSON (every figure) or CSV (a row per run)
  --quiet           no table on stdout
)";

// A sweep: "16", "1:256:x2" or "10:50:+10".
absl::StatusOr<std::vector<double>> ParseLevels(const std::string& name, const std::string& v) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected N, A:B:xF or A:B:+S, got '", v, "'"));
  };
  std::vector<std::string> parts = absl::StrSplit(v, ':');
  double a, b, step;
  if (parts.size() == 1) {
    if (!absl::SimpleAtod(parts[0], &a) || !(a > 0)) return bad();
    return std::vector<double>{a};
  }
  if (parts.size() != 3 || parts[2].size() < 2 || !absl::SimpleAtod(parts[0], &a) ||
      !absl::SimpleAtod(parts[1], &b) || !absl::SimpleAtod(parts[2].substr(1), &step) || !(a > 0) ||
      !(b >= a)) {
    return bad();
  }
  std::vector<double> levels;
  if (parts[2][0] == 'x' && step > 1) {
    for (double l = a; l <= b * (1 + 1e-9); l *= step) levels.push_back(l);
  } else if (parts[2][0] == '+' && step > 0) {
    for (double l = a; l <= b * (1 + 1e-9); l += step) levels.push_back(l);
  } else {
    return bad();
  }
  if (levels.size() > 64) return bad();
  return levels;
}

// "10" (seconds), "10s", "500ms", "2m".
absl::StatusOr<absl::Duration> ParseTime(const std::string& name, const std::string& v) {
  double seconds;
  absl::Duration d;
  if (absl::SimpleAtod(v, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(v, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected a time (10, 10s, 500ms), got '", v, "'"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be > 0, got '", v, "'"));
  }
  return d;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "normbench: %s\n(normbench --help lists the flags)\n", message.c_str());
  return 2;
}

int Main(const CliFlags& f) {
  if (!f.positional().empty()) return Usage(absl::StrCat("unexpected '", f.positional()[0], "'"));
  Config c;
  c.target = f.GetString("target", "localhost:50051");
  c.open = f.Has("rate");
  c.stream = f.GetBool("stream");
  c.echo = f.GetBool("echo");
  c.compare = f.GetBool("compare");
  c.verify = f.GetBool("verify");
  c.quiet = f.GetBool("quiet");
  if (c.compare && c.echo) return Usage("--compare runs Echo itself; leave out --echo");
  if (c.verify && c.echo) return Usage("--verify checks Normalize answers; leave out --echo");
  absl::StatusOr<std::vector<double>> levels =
      ParseLevels(c.open ? "rate" : "concurrency",
                  f.GetString(c.open ? "rate" : "concurrency", c.open ? "" : "1"));
  if (!levels.ok()) return Usage(std::string(levels.status().message()));
  c.levels = *levels;
  if (c.open) {
    absl::StatusOr<int64_t> cap = f.GetInt("concurrency", 64);
    if (!cap.ok() || *cap < 1 || *cap > 100000) {
      return Usage("--concurrency: with --rate, the cap of requests in flight, 1 to 100000");
    }
    c.concurrency = *cap;
  } else {
    for (double l : c.levels) {
      if (l != std::floor(l) || l > 100000)
        return Usage("--concurrency: whole numbers up to 100000");
    }
  }
  const std::string arrival = f.GetString("arrival", "constant");
  if (arrival != "constant" && arrival != "poisson") {
    return Usage(absl::StrCat("--arrival: expected constant or poisson, got '", arrival, "'"));
  }
  if (f.Has("arrival") && !c.open) return Usage("--arrival needs --rate (the open loop)");
  c.poisson = arrival == "poisson";
  if (f.Has("duration") && f.Has("requests"))
    return Usage("give --duration or --requests, not both");
  if (auto v = f.Find("duration")) {
    absl::StatusOr<absl::Duration> d = ParseTime("duration", *v);
    if (!d.ok()) return Usage(std::string(d.status().message()));
    c.duration = *d;
  }
  if (f.Has("requests")) {
    absl::StatusOr<int64_t> n = f.GetInt("requests", 0);
    if (!n.ok() || *n < 1) return Usage("--requests: expected a count >= 1");
    c.requests = *n;
  }
  if (auto v = f.Find("window")) {
    absl::StatusOr<absl::Duration> d = ParseTime("window", *v);
    if (!d.ok()) return Usage(std::string(d.status().message()));
    c.window = *d;
  }
  absl::StatusOr<int64_t> max_windows = f.GetInt("max-windows", 10);
  if (!max_windows.ok() || *max_windows < 3 || *max_windows > 1000) {
    return Usage("--max-windows: expected 3 to 1000");
  }
  c.max_windows = static_cast<int>(*max_windows);
  if (auto v = f.Find("warmup")) {
    int64_t count;
    if (absl::SimpleAtoi(*v, &count) && count >= 0) {
      c.warmup_requests = count;
      c.warmup_time = absl::ZeroDuration();
    } else if (absl::Duration d; absl::ParseDuration(*v, &d) && d >= absl::ZeroDuration()) {
      c.warmup_time = d;
    } else {
      return Usage(
          absl::StrCat("--warmup: expected a time (2s, 500ms) or a count (100), got '", *v, "'"));
    }
  }
  absl::StatusOr<int64_t> seed = f.GetInt("seed", 1);
  if (!seed.ok()) return Usage(std::string(seed.status().message()));
  c.seed = static_cast<uint64_t>(*seed);

  absl::StatusOr<Workload> workload = absl::InternalError("");
  if (auto mix = f.Find("mix")) {
    for (const auto& [name, boolean] : Workload::Flags()) {
      if (f.Has(name))
        return Usage(absl::StrCat("--mix describes the requests; leave out --", name));
    }
    std::ifstream in(*mix);
    if (!in.good()) return Usage(absl::StrCat("--mix: cannot read '", *mix, "'"));
    std::stringstream text;
    text << in.rdbuf();
    workload = Workload::FromMix(text.str(), c.seed);
  } else {
    workload = Workload::FromFlags(f, c.seed);
  }
  if (!workload.ok()) return Usage(std::string(workload.status().message()));
  if (c.verify) {
    if (absl::Status s = workload->ComputeReferences(); !s.ok())
      return Usage(std::string(s.message()));
  }

  ClientOptions options;
  absl::StatusOr<int64_t> timeout_ms = f.GetInt("timeout-ms", 30000);
  absl::StatusOr<int64_t> connections = f.GetInt("connections", 1);
  absl::StatusOr<int64_t> max_attempts = f.GetInt("max-attempts", options.retry.max_attempts);
  if (!timeout_ms.ok() || *timeout_ms < 1) return Usage("--timeout-ms: expected >= 1");
  if (!connections.ok() || *connections < 1 || *connections > 1024) {
    return Usage("--connections: expected 1 to 1024");
  }
  if (!max_attempts.ok() || *max_attempts < 1 || *max_attempts > 5) {
    return Usage(
        absl::StrCat("--max-attempts: expected 1 to 5, got '", f.GetString("max-attempts"), "'"));
  }
  options.timeout = absl::Milliseconds(*timeout_ms);
  options.own_connection = true;
  options.channels = static_cast<int>(*connections);
  options.retry.max_attempts = static_cast<int>(*max_attempts);
  ApplyCredentialFlags(f, &options);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(c.target, options);
  if (!client.ok()) return Usage(std::string(client.status().message()));
  if (f.GetBool("shm")) {
    if (absl::Status s = workload->MoveToSharedMemory(**client); !s.ok()) {
      std::fprintf(stderr, "normbench: --shm: %s\n", s.ToString().c_str());
      return 1;
    }
  }

  std::vector<std::string> labels;
  for (const WorkItem& item : workload->items()) {
    labels.push_back(workload->items().size() == 1 ? item.label
                                                   : absl::StrCat(item.weight, "x ", item.label));
  }
  if (!c.quiet) {
    std::printf("normbench %s -> %s: %s\n", NORMD_VERSION_STRING, c.target.c_str(),
                absl::StrJoin(labels, "; ").c_str());
  }
  Bench bench(c, *std::move(workload), *std::move(client));
  std::vector<RunResult> runs;
  for (double level : c.levels) {
    for (bool echo : c.compare ? std::vector<bool>{false, true} : std::vector<bool>{c.echo}) {
      runs.push_back(bench.Run(level, echo));
      if (!c.quiet) PrintRun(c, runs.back());
    }
  }
  std::vector<std::string> ratios;
  if (c.compare) {
    for (size_t i = 0; i + 1 < runs.size(); i += 2) {
      const double rps = runs[i + 1].rps() > 0 ? runs[i].rps() / runs[i + 1].rps() : 0;
      const int64_t echo_p50 = runs[i + 1].stats.latency_us.Percentile(0.5);
      const double p50 =
          echo_p50 > 0 ? static_cast<double>(runs[i].stats.latency_us.Percentile(0.5)) / echo_p50
                       : 0;
      std::printf("\nNormalize/Echo at %s %g: throughput %.2fx, p50 latency %.2fx\n",
                  c.open ? "rate" : "concurrency", runs[i].level, rps, p50);
      ratios.push_back(absl::StrCat("{\"level\": ", runs[i].level, ", \"throughput_ratio\": ", rps,
                                    ", \"p50_ratio\": ", p50, "}"));
    }
  }
  if (!c.quiet && runs.size() > 1) PrintSweep(c, runs);
  std::fflush(stdout);
  if (auto path = f.Find("json")) {
    std::vector<std::string> items;
    for (const WorkItem& item : bench.workload().items()) {
      items.push_back(
          absl::StrCat("{\"kind\": \"", item.label, "\", \"weight\": ", item.weight, "}"));
    }
    std::vector<std::string> rs;
    for (const RunResult& r : runs) rs.push_back(RunJson(c, r));
    std::ofstream(*path) << "{\"normbench\": \"" << NORMD_VERSION_STRING << "\", \"target\": \""
                         << c.target << "\", \"workload\": [" << absl::StrJoin(items, ", ")
                         << "], \"runs\": [" << absl::StrJoin(rs, ", ") << "], \"compare\": ["
                         << absl::StrJoin(ratios, ", ") << "]}\n";
  }
  if (auto path = f.Find("csv")) {
    std::ofstream out(*path);
    out << kCsvHeader << "\n";
    for (const RunResult& r : runs) out << CsvRow(c, r) << "\n";
  }
  bool good = true;
  for (const RunResult& r : runs) {
    good = good && r.stats.failed == 0 && r.stats.wrong_id == 0 && r.stats.mismatched_calls == 0 &&
           r.stats.sent == r.stats.answered();
  }
  return good ? 0 : 1;
}

}  // namespace
}  // namespace normd

int main(int argc, char** argv) {
  std::map<std::string, bool> known = {
      {"target", false},     {"connections", false}, {"max-attempts", false},
      {"timeout-ms", false}, {"concurrency", false}, {"rate", false},
      {"arrival", false},    {"stream", true},       {"echo", true},
      {"compare", true},     {"duration", false},    {"requests", false},
      {"window", false},     {"max-windows", false}, {"warmup", false},
      {"seed", false},       {"verify", true},       {"shm", true},
      {"mix", false},        {"json", false},        {"csv", false},
      {"quiet", true},       {"help", true}};
  for (const auto& [name, boolean] : normd::Workload::Flags()) known[name] = boolean;
  normd::AddCredentialFlags(&known);
  normd::CliFlags flags(known);
  const absl::Status parsed = flags.Parse(argc, argv);
  if (parsed.ok() && flags.GetBool("help")) {
    std::fputs(normd::kUsage, stdout);
    std::fputs(normd::Workload::FlagUsage(), stdout);
    std::fputs(normd::kCredentialUsage, stdout);
    return 0;
  }
  if (!parsed.ok()) return normd::Usage(std::string(parsed.message()));
  normd::TuneProcessForMessages();
  normd::TuneProcessForLargeAnswers();
  return normd::Main(flags);
}
