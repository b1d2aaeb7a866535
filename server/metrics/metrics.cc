#include "server/metrics/metrics.h"

#include "absl/strings/str_cat.h"
#include "server/metrics/process_metrics.h"

namespace normd::server::metrics {
namespace {

const char* const kCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

int64_t Nanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

void Help(std::string* out, absl::string_view name, absl::string_view type,
          absl::string_view help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

const char* Name(Op op) {
  static const char* const kNames[] = {"layer_norm", "rms_norm",   "l2_norm",
                                       "batch_norm", "group_norm", "instance_norm",
                                       "qk_norm",    "echo",       "other"};
  return kNames[static_cast<int>(op)];
}
const char* Name(DType dtype) {
  static const char* const kNames[] = {"f32", "f16", "bf16", "other"};
  return kNames[static_cast<int>(dtype)];
}
const char* Name(Backend backend) {
  static const char* const kNames[] = {"cpu", "cuda", "none"};
  return kNames[static_cast<int>(backend)];
}
const char* Name(Rejection reason) {
  static const char* const kNames[] = {"invalid_argument", "queue_full", "no_backend",
                                       "unauthenticated"};
  return kNames[static_cast<int>(reason)];
}

Metrics::Metrics(std::string version, std::string simd_target, bool cuda)
    : build_labels_(absl::StrCat("version=\"", version, "\",simd=\"", simd_target, "\",cuda=\"",
                                 cuda ? "true" : "false", "\"")) {
  for (auto& h : request_duration_) h = std::make_unique<Histogram>(LatencyBuckets(), 1e9);
  for (int b = 0; b < kBackends; ++b) {
    queue_duration_[b] = std::make_unique<Histogram>(LatencyBuckets(), 1e9);
    compute_duration_[b] = std::make_unique<Histogram>(LatencyBuckets(), 1e9);
    batch_size_[b] = std::make_unique<Histogram>(
        std::vector<double>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, 1);
  }
}

void Metrics::Record(const RequestRecord& r) {
  const int code = static_cast<int>(r.code);
  requests_[Index(r.op, r.dtype, r.backend, code >= 0 && code < kCodes ? code : 2)].fetch_add(
      1, std::memory_order_relaxed);
  request_duration_[static_cast<int>(r.op)]->Observe(Nanos(r.latency));
  if (r.batch_requests > 0) {
    const int b = static_cast<int>(r.backend);
    queue_duration_[b]->Observe(Nanos(r.queue));
    compute_duration_[b]->Observe(Nanos(r.compute));
    batch_size_[b]->Observe(r.batch_requests);
  }
  received_bytes_.fetch_add(r.received_bytes, std::memory_order_relaxed);
  sent_bytes_.fetch_add(r.sent_bytes, std::memory_order_relaxed);
}

void Metrics::RecordRejection(Rejection reason) {
  rejections_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
}

Metrics::Totals Metrics::totals() const {
  Totals t;
  for (int i = 0; i < static_cast<int>(requests_.size()); ++i) {
    const uint64_t n = requests_[i].load(std::memory_order_relaxed);
    t.requests += n;
    if (i % kCodes == 0) t.ok += n;
  }
  t.received_bytes = received_bytes_.load(std::memory_order_relaxed);
  t.sent_bytes = sent_bytes_.load(std::memory_order_relaxed);
  return t;
}

std::string Metrics::Exposition(const Gauges& gauges) const {
  std::string out;
  Help(&out, "normd_requests_total", "counter",
       "Requests answered, by op, input dtype, backend and gRPC status code.");
  for (int op = 0; op < kOps; ++op) {
    for (int dt = 0; dt < kDTypes; ++dt) {
      for (int be = 0; be < kBackends; ++be) {
        for (int code = 0; code < kCodes; ++code) {
          const uint64_t n = requests_[Index(static_cast<Op>(op), static_cast<DType>(dt),
                                             static_cast<Backend>(be), code)]
                                 .load(std::memory_order_relaxed);
          if (n == 0) continue;  // bounded label sets, but only the combinations seen
          absl::StrAppend(&out, "normd_requests_total{op=\"", Name(static_cast<Op>(op)),
                          "\",dtype=\"", Name(static_cast<DType>(dt)), "\",backend=\"",
                          Name(static_cast<Backend>(be)), "\",code=\"", kCodeNames[code], "\"} ", n,
                          "\n");
        }
      }
    }
  }
  Help(&out, "normd_request_duration_seconds", "histogram",
       "Time from receiving a request to its answer being ready, by op.");
  for (int op = 0; op < kOps; ++op) {
    if (request_duration_[op]->count() == 0) continue;
    request_duration_[op]->AppendTo(&out, "normd_request_duration_seconds",
                                    absl::StrCat("op=\"", Name(static_cast<Op>(op)), "\""));
  }
  for (const auto& [name, hists, help] :
       {std::tuple{"normd_queue_duration_seconds", &queue_duration_,
                   "Time from accepting a request to its backend run starting, by backend."},
        std::tuple{"normd_compute_duration_seconds", &compute_duration_,
                   "Duration of the backend run that computed a request, by backend."},
        std::tuple{"normd_batch_size", &batch_size_,
                   "Requests that shared one backend run, per request, by backend."}}) {
    Help(&out, name, "histogram", help);
    for (int be = 0; be < kBackends; ++be) {
      if ((*hists)[be]->count() == 0) continue;
      (*hists)[be]->AppendTo(&out, name,
                             absl::StrCat("backend=\"", Name(static_cast<Backend>(be)), "\""));
    }
  }
  Help(&out, "normd_received_bytes_total", "counter", "Bytes of request messages received.");
  absl::StrAppend(&out, "normd_received_bytes_total ",
                  received_bytes_.load(std::memory_order_relaxed), "\n");
  Help(&out, "normd_sent_bytes_total", "counter", "Bytes of response messages sent.");
  absl::StrAppend(&out, "normd_sent_bytes_total ", sent_bytes_.load(std::memory_order_relaxed),
                  "\n");
  Help(&out, "normd_rejections_total", "counter", "Requests refused before compute, by reason.");
  for (int r = 0; r < kRejections; ++r) {
    absl::StrAppend(&out, "normd_rejections_total{reason=\"", Name(static_cast<Rejection>(r)),
                    "\"} ", rejections_[r].load(std::memory_order_relaxed), "\n");
  }
  Help(&out, "normd_queue_depth", "gauge", "Requests waiting in the backends' queues.");
  absl::StrAppend(&out, "normd_queue_depth ", gauges.queue_depth, "\n");
  Help(&out, "normd_in_flight_requests", "gauge",
       "Requests accepted by the scheduler and not yet answered.");
  absl::StrAppend(&out, "normd_in_flight_requests ", gauges.in_flight, "\n");
  Help(&out, "normd_build_info", "gauge", "normd's version, SIMD target and CUDA backend.");
  absl::StrAppend(&out, "normd_build_info{", build_labels_, "} 1\n");
  AppendProcessMetrics(&out);
  return out;
}

}  // namespace normd::server::metrics
