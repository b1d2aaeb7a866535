// The metrics' recording and exposition: counters by label, cumulative histogram buckets
// whose count is the +Inf bucket, rejections, gauges and build info.
#include "server/metrics/metrics.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normd::server::metrics {
namespace {

using ::testing::HasSubstr;

TEST(HistogramTest, BucketsAreCumulativeAndCountIsTheInfBucket) {
  Histogram h({0.001, 0.01}, 1e9);
  h.Observe(500'000);     // 0.5 ms
  h.Observe(1'000'000);   // exactly on a bound: le="0.001"
  h.Observe(5'000'000);   // 5 ms
  h.Observe(20'000'000);  // 20 ms: +Inf only
  std::string out;
  h.AppendTo(&out, "x_seconds", "op=\"a\"");
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{op=\"a\",le=\"0.001\"} 2\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{op=\"a\",le=\"0.01\"} 3\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_bucket{op=\"a\",le=\"+Inf\"} 4\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_sum{op=\"a\"} 0.0265\n"));
  EXPECT_THAT(out, HasSubstr("x_seconds_count{op=\"a\"} 4\n"));
}

TEST(MetricsTest, RecordsFromManyThreadsWithoutLosingCounts) {
  Metrics m("1.2.3", "AVX2", false);
  RequestRecord ok;
  ok.op = Op::kRmsNorm;
  ok.dtype = DType::kBF16;
  ok.backend = Backend::kCpu;
  ok.latency = absl::Microseconds(300);
  ok.batch_requests = 2;
  ok.received_bytes = 100;
  ok.sent_bytes = 60;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) m.Record(ok);
    });
  }
  for (auto& t : threads) t.join();
  RequestRecord bad;
  bad.op = Op::kLayerNorm;
  bad.code = absl::StatusCode::kInvalidArgument;
  m.Record(bad);
  m.RecordRejection(Rejection::kInvalidArgument);
  const std::string text = m.Exposition({3, 7});
  EXPECT_THAT(text, HasSubstr("normd_requests_total{op=\"rms_norm\",dtype=\"bf16\",backend=\"cpu\","
                              "code=\"OK\"} 4000\n"));
  EXPECT_THAT(text, HasSubstr("normd_requests_total{op=\"layer_norm\",dtype=\"other\",backend="
                              "\"none\",code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("normd_rejections_total{reason=\"invalid_argument\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("normd_rejections_total{reason=\"queue_full\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("normd_batch_size_bucket{backend=\"cpu\",le=\"2\"} 4000\n"));
  EXPECT_THAT(text, HasSubstr("normd_received_bytes_total 400000\n"));
  EXPECT_THAT(text, HasSubstr("normd_sent_bytes_total 240000\n"));
  EXPECT_THAT(text, HasSubstr("normd_queue_depth 3\n"));
  EXPECT_THAT(text, HasSubstr("normd_in_flight_requests 7\n"));
  EXPECT_THAT(text,
              HasSubstr("normd_build_info{version=\"1.2.3\",simd=\"AVX2\",cuda=\"false\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter"));
  const Metrics::Totals totals = m.totals();
  EXPECT_EQ(totals.requests, 4001u);
  EXPECT_EQ(totals.ok, 4000u);
}

}  // namespace
}  // namespace normd::server::metrics
