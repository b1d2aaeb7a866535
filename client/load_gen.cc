#include "client/load_gen.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace normd {

void LoadStats::Record(absl::StatusCode code, int64_t latency_us) {
  latencies_us[absl::StatusCodeToString(code)].push_back(latency_us);
  (code == absl::StatusCode::kOk ? ok : failed)++;
}

void LoadStats::Merge(const LoadStats& other) {
  sent += other.sent;
  ok += other.ok;
  failed += other.failed;
  wrong_id += other.wrong_id;
  batched += other.batched;
  for (const auto& [code, v] : other.latencies_us) {
    auto& dst = latencies_us[code];
    dst.insert(dst.end(), v.begin(), v.end());
  }
}

std::vector<int64_t> LoadStats::AllLatencies() const {
  std::vector<int64_t> all;
  for (const auto& [code, v] : latencies_us) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  return all;
}

LoadStats OpenLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                   const OpenLoopOptions& options) {
  // Shared with the callbacks: the last one may still be leaving the lock when this
  // function returns.
  struct State {
    absl::Mutex mu;
    absl::CondVar answered;
    LoadStats stats ABSL_GUARDED_BY(mu);
    int64_t in_flight ABSL_GUARDED_BY(mu) = 0;
  };
  auto st = std::make_shared<State>();
  v1::NormalizeRequest next = request;
  for (int64_t n = 0;; ++n) {
    const absl::Time at = options.start + absl::Seconds(static_cast<double>(n) / options.rate);
    if (at >= options.end) break;
    if (const absl::Time now = absl::Now(); at > now) absl::SleepFor(at - now);
    {
      absl::MutexLock l(&st->mu);
      while (st->in_flight >= options.max_in_flight) st->answered.Wait(&st->mu);
      ++st->in_flight;
      ++st->stats.sent;
    }
    next.set_id(absl::StrCat(n));
    auto done = [st, at, id = next.id()](absl::StatusOr<v1::NormalizeResponse> r) {
      const int64_t us = absl::ToInt64Microseconds(absl::Now() - at);
      absl::MutexLock l(&st->mu);
      if (r.ok() && r->id() != id) ++st->stats.wrong_id;
      if (r.ok() && r->timing().batch_requests() > 1) ++st->stats.batched;
      st->stats.Record(r.status().code(), us);
      --st->in_flight;
      st->answered.Signal();
    };
    Client* client = clients[n % clients.size()];
    if (options.echo) {
      client->EchoAsync(next, std::move(done));
    } else {
      client->NormalizeAsync(next, std::move(done));
    }
  }
  absl::MutexLock l(&st->mu);
  while (st->in_flight > 0) st->answered.Wait(&st->mu);
  return std::move(st->stats);
}

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

std::string LatencyJson(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return absl::StrCat("{\"count\": ", v.size(), ", \"p50\": ", Percentile(v, 0.5),
                      ", \"p90\": ", Percentile(v, 0.9), ", \"p99\": ", Percentile(v, 0.99),
                      ", \"max\": ", v.empty() ? 0 : v.back(), "}");
}

}  // namespace normd
