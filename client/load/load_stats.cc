#include "normd/load/load_stats.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace normd {

void LoadStats::Record(absl::StatusCode code, const v1::NormalizeResponse* answer,
                       const std::string& sent_id, int64_t latency_us) {
  if (answer != nullptr && answer->id() != sent_id) ++wrong_id;
  if (answer != nullptr && answer->timing().batch_requests() > 1) ++batched;
  latencies_us[absl::StatusCodeToString(code)].push_back(latency_us);
  (code == absl::StatusCode::kOk ? ok : failed)++;
}

void LoadStats::Merge(const LoadStats& other) {
  sent += other.sent;
  ok += other.ok;
  failed += other.failed;
  wrong_id += other.wrong_id;
  batched += other.batched;
  send_late_us.insert(send_late_us.end(), other.send_late_us.begin(), other.send_late_us.end());
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
