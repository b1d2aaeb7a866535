// normd's Prometheus metrics: what every request did, recorded without a lock on the
// request path (fixed label sets, one atomic counter per label combination and per
// histogram bucket), and the text exposition a scrape of /metrics returns.
//
// Names follow Prometheus conventions (base units, `_total` counters, bounded labels):
//   normd_requests_total{op,dtype,backend,code}        counter
//   normd_request_duration_seconds{op}                 histogram, received -> answered
//   normd_queue_duration_seconds{backend}              histogram, accepted -> backend run
//   normd_compute_duration_seconds{backend}            histogram, the backend run
//   normd_batch_size{backend}                          histogram, requests per backend run
//   normd_received_bytes_total, normd_sent_bytes_total counters (message bytes)
//   normd_rejections_total{reason}                     counter
//   normd_queue_depth, normd_in_flight_requests        gauges (read at scrape)
//   normd_build_info{version,simd,cuda}                gauge, 1
//   process_*                                          process_metrics.h
//
// Thread safety: Record* may be called from any thread at once; Exposition too.
#ifndef NORMD_SERVER_METRICS_METRICS_H_
#define NORMD_SERVER_METRICS_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/metrics/histogram.h"

namespace normd::server::metrics {

// Label values. kOther covers requests whose op or dtype could not be read.
enum class Op : uint8_t {
  kLayerNorm,
  kRmsNorm,
  kL2Norm,
  kBatchNorm,
  kGroupNorm,
  kInstanceNorm,
  kQkNorm,
  kEcho,
  kOther,
  kCount
};
enum class DType : uint8_t { kF32, kF16, kBF16, kOther, kCount };
enum class Backend : uint8_t { kCpu, kCuda, kNone, kCount };  // kNone: never reached one
enum class Rejection : uint8_t {
  kInvalidArgument,  // validation failed
  kQueueFull,        // the backend's queue was full (UNAVAILABLE)
  kNoBackend,        // the requested backend is absent (FAILED_PRECONDITION)
  kUnauthenticated,  // no or a wrong bearer token
  kCount
};

const char* Name(Op op);
const char* Name(DType dtype);
const char* Name(Backend backend);
const char* Name(Rejection reason);

// One answered request.
struct RequestRecord {
  Op op = Op::kOther;
  DType dtype = DType::kOther;
  Backend backend = Backend::kNone;
  absl::StatusCode code = absl::StatusCode::kOk;
  absl::Duration latency;         // received -> answered
  absl::Duration queue, compute;  // when a backend ran it
  int batch_requests = 0;         // 0: no backend run
  int64_t received_bytes = 0, sent_bytes = 0;
};

// What a scrape reads from the server at that moment.
struct Gauges {
  int64_t queue_depth = 0;
  int64_t in_flight = 0;
};

class Metrics {
 public:
  // build_info's labels.
  Metrics(std::string version, std::string simd_target, bool cuda);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void Record(const RequestRecord& r);
  void RecordRejection(Rejection reason);

  // The Prometheus text exposition (format 0.0.4), normd's metrics and process_*.
  std::string Exposition(const Gauges& gauges) const;

  // Totals since start, for the log summary: requests answered, of them OK, bytes.
  struct Totals {
    uint64_t requests = 0, ok = 0, received_bytes = 0, sent_bytes = 0;
  };
  Totals totals() const;

 private:
  static constexpr int kOps = static_cast<int>(Op::kCount);
  static constexpr int kDTypes = static_cast<int>(DType::kCount);
  static constexpr int kBackends = static_cast<int>(Backend::kCount);
  static constexpr int kCodes = 17;  // google.rpc.Code 0..16
  static constexpr int kRejections = static_cast<int>(Rejection::kCount);

  static int Index(Op op, DType dtype, Backend backend, int code) {
    return ((static_cast<int>(op) * kDTypes + static_cast<int>(dtype)) * kBackends +
            static_cast<int>(backend)) *
               kCodes +
           code;
  }

  const std::string build_labels_;
  std::array<std::atomic<uint64_t>, kOps * kDTypes * kBackends * kCodes> requests_{};
  std::array<std::atomic<uint64_t>, kRejections> rejections_{};
  std::atomic<uint64_t> received_bytes_{0}, sent_bytes_{0};
  std::array<std::unique_ptr<Histogram>, kOps> request_duration_;
  std::array<std::unique_ptr<Histogram>, kBackends> queue_duration_, compute_duration_, batch_size_;
};

}  // namespace normd::server::metrics

#endif  // NORMD_SERVER_METRICS_METRICS_H_
