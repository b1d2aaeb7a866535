// normbench: a closed-loop load generator for normd. `--concurrency` workers each keep one
// request in flight (unary calls, or one bidirectional stream per worker with --stream)
// for `--duration` seconds, then it prints (and with --json writes) the counts,
// throughput and latency percentiles.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cli_flags.h"
#include "normd/client.h"

namespace normd {
namespace {

constexpr char kUsage[] =
    "usage: normbench [--target HOST:PORT] [--op rms-norm|layer-norm|l2-norm] [--shape 1x4096]\n"
    "                 [--dtype f32|f16|bf16] [--concurrency N] [--duration SECONDS] [--stream]\n"
    "                 [--json FILE]\n";

struct WorkerStats {
  std::vector<int64_t> latencies_us;
  std::map<std::string, int64_t> codes;
  int64_t ok = 0, failed = 0;
};

absl::StatusOr<v1::NormalizeRequest> MakeRequest(const CliFlags& f) {
  v1::NormalizeRequest r;
  std::vector<int64_t> shape;
  for (absl::string_view d : absl::StrSplit(f.GetString("shape", "1x4096"), 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--shape: expected e.g. 1x4096, got '", f.GetString("shape"), "'"));
    }
    shape.push_back(v);
  }
  const std::string dt = f.GetString("dtype", "f32");
  DType dtype = dt == "f16" ? DType::kF16 : dt == "bf16" ? DType::kBF16 : DType::kF32;
  if (dt != "f32" && dt != "f16" && dt != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: expected f32, f16 or bf16, got '", dt, "'"));
  }
  HostTensor x(dtype, shape);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> values(x.numel());
  for (auto& v : values) v = dist(rng);
  ToWire(HostTensor::FromFloats(dtype, shape, values), r.mutable_input());
  const std::string op = f.GetString("op", "rms-norm");
  if (op == "rms-norm") {
    r.mutable_rms_norm();
  } else if (op == "layer-norm") {
    r.mutable_layer_norm();
  } else if (op == "l2-norm") {
    r.mutable_l2_norm();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--op: expected rms-norm, layer-norm or l2-norm, got '", op, "'"));
  }
  return r;
}

void Record(WorkerStats* s, absl::StatusCode code, absl::Time start) {
  s->latencies_us.push_back(absl::ToInt64Microseconds(absl::Now() - start));
  s->codes[absl::StatusCodeToString(code)]++;
  (code == absl::StatusCode::kOk ? s->ok : s->failed)++;
}

void UnaryWorker(Client* client, const v1::NormalizeRequest& request, absl::Time end,
                 WorkerStats* s) {
  while (absl::Now() < end) {
    const absl::Time start = absl::Now();
    Record(s, client->Normalize(request).status().code(), start);
  }
}

void StreamWorker(Client* client, const v1::NormalizeRequest& request, absl::Time end,
                  WorkerStats* s) {
  std::unique_ptr<NormalizeStream> stream = client->OpenStream();
  v1::NormalizeResponse response;
  while (absl::Now() < end) {
    const absl::Time start = absl::Now();
    if (!stream->Write(request) || !stream->Read(&response)) {
      Record(s, stream->Finish().code(), start);
      return;
    }
    Record(s,
           response.has_error() ? static_cast<absl::StatusCode>(response.error().code())
                                : absl::StatusCode::kOk,
           start);
  }
  stream->Finish().IgnoreError();
}

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

int Run(const CliFlags& f) {
  absl::StatusOr<v1::NormalizeRequest> request = MakeRequest(f);
  absl::StatusOr<int64_t> concurrency = f.GetInt("concurrency", 1);
  absl::StatusOr<double> duration = f.GetDouble("duration", 5);
  for (const absl::Status& s : {request.status(), concurrency.status(), duration.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "normbench: %s\n%s", std::string(s.message()).c_str(), kUsage);
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(f.GetString("target", "localhost:50051"), {});
  if (!client.ok()) {
    std::fprintf(stderr, "normbench: %s\n", client.status().ToString().c_str());
    return 1;
  }
  const bool stream = f.GetBool("stream");
  std::vector<WorkerStats> stats(*concurrency);
  std::vector<std::thread> workers;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(*duration);
  for (int64_t i = 0; i < *concurrency; ++i) {
    workers.emplace_back(stream ? StreamWorker : UnaryWorker, client->get(), std::cref(*request),
                         end, &stats[i]);
  }
  for (auto& w : workers) w.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);

  WorkerStats all;
  for (auto& s : stats) {
    all.ok += s.ok;
    all.failed += s.failed;
    all.latencies_us.insert(all.latencies_us.end(), s.latencies_us.begin(), s.latencies_us.end());
    for (const auto& [code, n] : s.codes) all.codes[code] += n;
  }
  std::sort(all.latencies_us.begin(), all.latencies_us.end());
  const double rps = all.ok / elapsed;
  std::vector<std::string> codes;
  for (const auto& [code, n] : all.codes) codes.push_back(absl::StrCat("\"", code, "\": ", n));
  const std::string json = absl::StrCat(
      "{\"op\": \"", f.GetString("op", "rms-norm"), "\", \"shape\": \"",
      f.GetString("shape", "1x4096"), "\", \"dtype\": \"", f.GetString("dtype", "f32"),
      "\", \"concurrency\": ", *concurrency, ", \"stream\": ", stream ? "true" : "false",
      ", \"duration_s\": ", elapsed, ", \"requests_ok\": ", all.ok,
      ", \"requests_failed\": ", all.failed, ", \"throughput_rps\": ", rps,
      ", \"latency_us\": {\"p50\": ", Percentile(all.latencies_us, 0.5),
      ", \"p90\": ", Percentile(all.latencies_us, 0.9),
      ", \"p99\": ", Percentile(all.latencies_us, 0.99),
      ", \"max\": ", all.latencies_us.empty() ? 0 : all.latencies_us.back(),
      "}, \"status_codes\": {", absl::StrJoin(codes, ", "), "}}");
  std::printf("%s\n", json.c_str());
  if (const auto path = f.Find("json")) {
    std::ofstream(*path) << json << "\n";
  }
  return all.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace normd

int main(int argc, char** argv) {
  normd::CliFlags flags({{"target", false},
                         {"op", false},
                         {"shape", false},
                         {"dtype", false},
                         {"concurrency", false},
                         {"duration", false},
                         {"stream", true},
                         {"json", false},
                         {"help", true}});
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || flags.GetBool("help")) {
    if (!s.ok()) std::fprintf(stderr, "normbench: %s\n", std::string(s.message()).c_str());
    std::fputs(normd::kUsage, stderr);
    return s.ok() ? 0 : 2;
  }
  return normd::Run(flags);
}
