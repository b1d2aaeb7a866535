#include "normd/load/load_stats.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace normd {

void LoadStats::Record(const Answer& a) {
  if (a.response != nullptr && a.response->id() != a.sent_id) ++wrong_id;
  if (a.response != nullptr && a.response->timing().batch_requests() > 1) ++batched;
  const bool good = a.code == absl::StatusCode::kOk;
  (good ? ok : failed)++;
  latency_us.Record(a.latency_us);
  by_code[absl::StatusCodeToString(a.code)].Record(a.latency_us);
  PerPeer& peer = by_peer[a.peer];
  (good ? peer.ok : peer.failed)++;
  if (a.previous_attempts > 0) {
    ++retried_calls;
    retried_attempts += a.previous_attempts;
  }
  if (a.mismatched >= 0) {
    ++verified;
    if (a.mismatched > 0) ++mismatched_calls;
  }
  bytes += a.bytes;
  const size_t s = static_cast<size_t>(std::max(0.0, a.second));
  if (s >= series.size()) series.resize(s + 1);
  (good ? series[s].ok : series[s].failed)++;
  series[s].latency_us.Record(a.latency_us);
}

void LoadStats::Merge(const LoadStats& o) {
  sent += o.sent;
  ok += o.ok;
  failed += o.failed;
  wrong_id += o.wrong_id;
  batched += o.batched;
  retried_calls += o.retried_calls;
  retried_attempts += o.retried_attempts;
  verified += o.verified;
  mismatched_calls += o.mismatched_calls;
  bytes += o.bytes;
  latency_us.Merge(o.latency_us);
  send_late_us.Merge(o.send_late_us);
  for (const auto& [code, h] : o.by_code) by_code[code].Merge(h);
  for (const auto& [peer, c] : o.by_peer) {
    by_peer[peer].ok += c.ok;
    by_peer[peer].failed += c.failed;
  }
  if (o.series.size() > series.size()) series.resize(o.series.size());
  for (size_t i = 0; i < o.series.size(); ++i) {
    series[i].ok += o.series[i].ok;
    series[i].failed += o.series[i].failed;
    series[i].latency_us.Merge(o.series[i].latency_us);
  }
}

std::string LatencyJson(const LatencyHistogram& h) {
  return absl::StrCat("{\"count\": ", h.count(), ", \"min\": ", h.min(), ", \"mean\": ", h.mean(),
                      ", \"p50\": ", h.Percentile(0.5), ", \"p90\": ", h.Percentile(0.9),
                      ", \"p95\": ", h.Percentile(0.95), ", \"p99\": ", h.Percentile(0.99),
                      ", \"p99.9\": ", h.Percentile(0.999), ", \"max\": ", h.max(), "}");
}

}  // namespace normd
