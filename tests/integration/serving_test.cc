// The serving core over real gRPC on loopback: full-queue rejection, deadline expiry and
// cancellation while queued, ragged batches bit-identical to the same requests run alone,
// pipelined streams interleaving ops, and draining on shutdown. The server runs on a
// GatedBackend with one executor and no inline path, so a test decides when queued
// requests may run.
#include <functional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/testing/gated_backend.h"
#include "server/server.h"
#include "tests/integration/gated_server.h"
#include "tests/integration/oracle.h"

namespace normd {
namespace {

using testing::GatedBackend;

class ServingTest : public ::testing::Test {
 protected:
  void Start(server::SchedulerOptions sched = {}) {
    server::ServerOptions options;
    options.scheduler = sched;
    absl::StatusOr<testing::GatedServer> g = testing::StartGatedServer(options);
    ASSERT_TRUE(g.ok()) << g.status();
    gate_ = g->gate;
    server_ = std::move(g->server);
    target_ = g->target;
    // The server's own answers: a retried rejection would be rejected again and counted
    // twice (retry_test.cc covers the client's retries).
    ClientOptions no_retries;
    no_retries.retry.max_attempts = 1;
    auto c = Client::Create(target_, no_retries);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    stub_ =
        v1::NormService::NewStub(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (gate_) gate_->Open();
    for (auto& t : threads_) t.join();
  }

  // Waits (up to 10 s) until the scheduler's counters satisfy `pred`.
  void AwaitStats(const std::function<bool(const server::SchedulerStats&)>& pred,
                  const char* what) {
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (!pred(server_->scheduler_stats())) {
      const server::SchedulerStats s = server_->scheduler_stats();
      ASSERT_LT(absl::Now(), until)
          << "timed out waiting for " << what << "; enqueued " << s.enqueued << ", expired "
          << s.expired << ", cancelled " << s.cancelled << ", queued " << s.queued_requests
          << ", completed " << s.completed << ", in flight " << s.in_flight;
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  // Sends `request` on its own thread; the answer lands in *out.
  void SendAsync(const v1::NormalizeRequest& request, absl::StatusOr<v1::NormalizeResponse>* out) {
    threads_.emplace_back([this, request, out] { *out = client_->Normalize(request); });
  }

  // Closes the gate and parks one request inside the backend: the executor is busy and
  // whatever comes next waits in the queue.
  void BlockExecutor(absl::StatusOr<v1::NormalizeResponse>* blocker) {
    gate_->Close();
    SendAsync(Rms(1, 8, "blocker"), blocker);
    gate_->AwaitEntered(1);
  }

  HostTensor Random(DType t, std::vector<int64_t> shape) {
    std::normal_distribution<float> dist(0.3f, 1.5f);
    HostTensor out(t, shape);
    std::vector<float> v(out.numel());
    for (auto& x : v) x = dist(rng_);
    return HostTensor::FromFloats(t, shape, v);
  }
  v1::NormalizeRequest Rms(int64_t rows, int64_t cols, const std::string& id,
                           DType t = DType::kF32) {
    RmsNormOptions o;
    o.backend = Backend::kCpu;
    v1::NormalizeRequest r = MakeRequest(Random(t, {rows, cols}), o);
    r.set_id(id);
    return r;
  }

  std::shared_ptr<GatedBackend> gate_;
  std::unique_ptr<server::NormServer> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<v1::NormService::Stub> stub_;
  std::string target_;
  std::vector<std::thread> threads_;
  std::mt19937_64 rng_{5};
};

bool Segments(const GatedBackend& gate, int64_t rows) {
  for (const auto& call : gate.calls()) {
    for (const auto& s : call) {
      if (s.rows == rows) return true;
    }
  }
  return false;
}

TEST_F(ServingTest, FullQueueAnswersUnavailableAtOnceAndLosesNothing) {
  server::SchedulerOptions sched;
  sched.max_queue_requests = 2;
  Start(sched);
  absl::StatusOr<v1::NormalizeResponse> blocker, q1, q2;
  BlockExecutor(&blocker);
  SendAsync(Rms(2, 8, "q1"), &q1);
  SendAsync(Rms(3, 8, "q2"), &q2);
  AwaitStats([](const auto& s) { return s.queued_requests == 2; }, "two queued");

  const absl::Time start = absl::Now();
  absl::StatusOr<v1::NormalizeResponse> rejected = client_->Normalize(Rms(4, 8, "over"));
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable) << rejected.status();
  EXPECT_NE(rejected.status().message().find("overloaded"), std::string::npos);
  EXPECT_NE(rejected.status().message().find("--max-queue-requests 2"), std::string::npos);
  EXPECT_LT(took, absl::Milliseconds(500)) << "the rejection waited for the queue";

  gate_->Open();
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (auto* r : {&blocker, &q1, &q2}) ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(q1->id(), "q1");
  EXPECT_EQ(q2->id(), "q2");
  EXPECT_FALSE(Segments(*gate_, 4)) << "the rejected request was computed";
  // The scheduler counts a Work completed after its `done` returns, and `done` sends the
  // answer: the client can see it first.
  AwaitStats([](const auto& s) { return s.completed == 3 && s.in_flight == 0; }, "completed");
  const server::SchedulerStats st = server_->scheduler_stats();
  EXPECT_EQ(st.rejected_full, 1);
  EXPECT_EQ(st.enqueued, 3);
  EXPECT_EQ(st.completed, 3);
  EXPECT_EQ(st.in_flight, 0);
}

TEST_F(ServingTest, DeadlinePassingWhileQueuedDropsTheRequestUncomputed) {
  Start();
  absl::StatusOr<v1::NormalizeResponse> blocker;
  BlockExecutor(&blocker);
  ClientOptions short_deadline;
  short_deadline.timeout = absl::Milliseconds(150);
  // Its own connection, made before the timed call: an earlier test's server on a reused
  // port can leave gRPC's shared connection in reconnect backoff, and then the request
  // would expire in the client before reaching this server.
  short_deadline.own_connection = true;
  auto hasty = Client::Create(target_, short_deadline);
  ASSERT_TRUE(hasty.ok());
  ASSERT_TRUE((*hasty)->Echo(Rms(1, 8, "connect")).ok());
  absl::StatusOr<v1::NormalizeResponse> late = (*hasty)->Normalize(Rms(7, 8, "late"));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  // The server takes it out of the queue itself, without waiting for the executor. Its
  // own deadline timer counts it expired; the client's cancel when its (slightly earlier)
  // deadline passes can get there first and count it cancelled. Either way it leaves at once.
  AwaitStats([](const auto& s) { return s.expired + s.cancelled == 1 && s.queued_requests == 0; },
             "expiry");
  EXPECT_EQ(server_->scheduler_stats().queued_bytes, 0);
  gate_->Open();
  for (auto& t : threads_) t.join();
  threads_.clear();
  ASSERT_TRUE(blocker.ok()) << blocker.status();
  EXPECT_FALSE(Segments(*gate_, 7)) << "the expired request was computed";
  EXPECT_TRUE(client_->Normalize(Rms(2, 8, "after")).ok());
}

TEST_F(ServingTest, CancelledCallLeavesTheQueueAndIsNeverComputed) {
  Start();
  absl::StatusOr<v1::NormalizeResponse> blocker;
  BlockExecutor(&blocker);
  grpc::ClientContext context;
  v1::NormalizeResponse response;
  grpc::Status status;
  std::thread call([&] { status = stub_->Normalize(&context, Rms(5, 8, "gone"), &response); });
  AwaitStats([](const auto& s) { return s.queued_requests == 1; }, "queued");
  EXPECT_GT(server_->scheduler_stats().queued_bytes, 5 * 8 * 4);
  context.TryCancel();
  call.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  AwaitStats([](const auto& s) { return s.cancelled == 1 && s.queued_bytes == 0; }, "cancellation");
  gate_->Open();
  for (auto& t : threads_) t.join();
  threads_.clear();
  ASSERT_TRUE(blocker.ok());
  EXPECT_FALSE(Segments(*gate_, 5)) << "the cancelled request was computed";
  AwaitStats([](const auto& s) { return s.in_flight == 0; }, "nothing in flight");
  EXPECT_TRUE(client_->Normalize(Rms(2, 8, "after")).ok());
}

// Requests of different ops, sizes, parameters and weights, queued together, run as one
// ragged batch per dtype; a bad request and a cancelled one travel with them. Each output
// is bit-identical to the same request run alone.
TEST_F(ServingTest, MixedShapeBatchesAreBitIdenticalToRunsAlone) {
  Start();
  std::vector<v1::NormalizeRequest> f32, bf16;
  {
    RmsNormOptions o;
    o.weight = Random(DType::kF32, {64});
    f32.push_back(MakeRequest(Random(DType::kF32, {3, 64}), o));
    RmsNormOptions res;
    res.residual = ResidualOptions{Random(DType::kF32, {2, 4097}), 0.7,
                                   ResidualOptions::Placement::kAddThenNorm, true};
    res.weight = Random(DType::kF32, {4097});
    f32.push_back(MakeRequest(Random(DType::kF32, {2, 4097}), res));
    LayerNormOptions ln;
    ln.weight = Random(DType::kF32, {300});
    ln.bias = Random(DType::kF32, {300});
    f32.push_back(MakeRequest(Random(DType::kF32, {5, 300}), ln));
    f32.push_back(MakeRequest(Random(DType::kF32, {1, 1000}), L2NormOptions{}));
    RmsNormOptions gemma;
    gemma.weight = Random(DType::kF32, {128});
    gemma.weight_offset = 1;
    gemma.partial_fraction = 0.5;
    f32.push_back(MakeRequest(Random(DType::kF32, {1, 128}), gemma));
    QkNormOptions qk;
    qk.q_weight = Random(DType::kF32, {64});
    qk.k_weight = Random(DType::kF32, {64});
    f32.push_back(
        MakeRequest(Random(DType::kF32, {2, 4, 64}), Random(DType::kF32, {2, 2, 64}), qk));
    LayerNormOptions std_eps;
    std_eps.eps_placement = EpsPlacement::kOutsideSqrt;
    std_eps.residual = ResidualOptions{Random(DType::kF32, {4, 33}), 2.0,
                                       ResidualOptions::Placement::kNormThenAdd, false};
    f32.push_back(MakeRequest(Random(DType::kF32, {4, 33}), std_eps));
    RmsNormOptions b;
    b.weight = Random(DType::kBF16, {100});
    bf16.push_back(MakeRequest(Random(DType::kBF16, {2, 100}), b));
    bf16.push_back(MakeRequest(Random(DType::kBF16, {3, 50}), LayerNormOptions{}));
  }
  std::vector<v1::NormalizeRequest> all;
  for (auto* group : {&f32, &bf16}) {
    for (auto& r : *group) {
      r.set_id(absl::StrCat("r", all.size()));
      r.set_backend(v1::BACKEND_CPU);
      all.push_back(r);
    }
  }

  absl::StatusOr<v1::NormalizeResponse> blocker;
  BlockExecutor(&blocker);
  std::vector<absl::StatusOr<v1::NormalizeResponse>> batched(all.size());
  for (size_t i = 0; i < all.size(); ++i) SendAsync(all[i], &batched[i]);
  // A bad request is answered at once and never joins the queue.
  v1::NormalizeRequest bad = Rms(2, 16, "bad");
  RmsNormOptions wrong;
  wrong.weight = Random(DType::kF32, {15});
  bad = MakeRequest(Random(DType::kF32, {2, 16}), wrong);
  EXPECT_EQ(client_->Normalize(bad).status().code(), absl::StatusCode::kInvalidArgument);
  // A batchmate cancelled while queued.
  grpc::ClientContext cancel_context;
  v1::NormalizeResponse cancelled_response;
  grpc::Status cancelled_status;
  std::thread cancelled([&] {
    cancelled_status =
        stub_->Normalize(&cancel_context, Rms(9, 64, "cancelled"), &cancelled_response);
  });
  const int64_t n = static_cast<int64_t>(all.size());
  AwaitStats([n](const auto& s) { return s.queued_requests == n + 1; }, "all queued");
  cancel_context.TryCancel();
  cancelled.join();
  AwaitStats([](const auto& s) { return s.cancelled == 1; }, "cancellation");
  gate_->Open();
  for (auto& t : threads_) t.join();
  threads_.clear();

  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(batched[i].ok()) << i << ": " << batched[i].status();
    const int want = i < f32.size() ? static_cast<int>(f32.size()) : static_cast<int>(bf16.size());
    EXPECT_EQ(batched[i]->timing().batch_requests(), want) << "request " << i << " not batched";
    testing::ExpectMatchesOracle(all[i], *batched[i], all[i].id());
  }
  EXPECT_FALSE(Segments(*gate_, 9)) << "the cancelled request was computed";
  // Alone: the queue is empty, so each request is its own backend run.
  for (size_t i = 0; i < all.size(); ++i) {
    absl::StatusOr<v1::NormalizeResponse> alone = client_->Normalize(all[i]);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(alone->timing().batch_requests(), 1);
    EXPECT_EQ(alone->output().data(), batched[i]->output().data()) << all[i].id();
    EXPECT_EQ(alone->k_output().data(), batched[i]->k_output().data()) << all[i].id();
    EXPECT_EQ(alone->residual_sum().data(), batched[i]->residual_sum().data()) << all[i].id();
  }
}

TEST_F(ServingTest, BatchLimitsSplitTheQueueIntoSeveralRuns) {
  server::SchedulerOptions sched;
  sched.batch_max_rows = 10;
  Start(sched);
  absl::StatusOr<v1::NormalizeResponse> blocker;
  BlockExecutor(&blocker);
  std::vector<absl::StatusOr<v1::NormalizeResponse>> out(6);
  for (int i = 0; i < 6; ++i) {
    SendAsync(Rms(4, 32, absl::StrCat("r", i)), &out[i]);
    // One at a time, so the queue order is known.
    AwaitStats([i](const auto& s) { return s.queued_requests == i + 1; }, "queued");
  }
  gate_->Open();
  for (auto& t : threads_) t.join();
  threads_.clear();
  // 4 rows each, at most 10 rows a run: runs of 2, 2, 2 after the blocker.
  const auto calls = gate_->calls();
  ASSERT_EQ(calls.size(), 4u);
  for (size_t c = 1; c < calls.size(); ++c) EXPECT_EQ(calls[c].size(), 2u) << c;
  for (auto& r : out) {
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->timing().batch_requests(), 2);
  }
}

TEST_F(ServingTest, PipelinedStreamInterleavesOpsInRequestOrder) {
  Start();
  std::vector<v1::NormalizeRequest> requests;
  for (int i = 0; i < 24; ++i) {
    v1::NormalizeRequest r;
    switch (i % 6) {
      case 0:
        r = Rms(3, 40 + i, "");
        break;
      case 1: {
        LayerNormOptions o;
        o.bias = Random(DType::kBF16, {17});
        r = MakeRequest(Random(DType::kBF16, {2, 17}), o);
        break;
      }
      case 2: {
        GroupNormOptions o;
        o.num_groups = 2;
        r = MakeRequest(Random(DType::kF32, {2, 4, 5}), o);
        break;
      }
      case 3: {
        BatchNormOptions o;
        o.training = true;
        r = MakeRequest(Random(DType::kF16, {3, 2, 4}), o);
        break;
      }
      case 4:
        r = MakeRequest(Random(DType::kF32, {1, 4, 2, 16}), Random(DType::kF32, {1, 2, 2, 16}),
                        QkNormOptions{});
        break;
      case 5:  // bad: GroupNorm groups do not divide channels
      {
        GroupNormOptions o;
        o.num_groups = 3;
        r = MakeRequest(Random(DType::kF32, {2, 4, 5}), o);
        break;
      }
    }
    r.set_id(absl::StrCat("s", i));
    requests.push_back(r);
  }
  std::unique_ptr<NormalizeStream> stream = client_->OpenStream();
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));  // all before any read
  for (size_t i = 0; i < requests.size(); ++i) {
    v1::NormalizeResponse response;
    ASSERT_TRUE(stream->Read(&response)) << i;
    ASSERT_EQ(response.id(), requests[i].id());
    if (i % 6 == 5) {
      EXPECT_EQ(response.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_FALSE(response.has_output());
    } else {
      EXPECT_FALSE(response.has_error()) << response.error().message();
      testing::ExpectMatchesOracle(requests[i], response, requests[i].id());
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServingTest, ShutdownDrainsQueuedWorkThenRefuses) {
  Start();
  absl::StatusOr<v1::NormalizeResponse> blocker, queued;
  BlockExecutor(&blocker);
  SendAsync(Rms(2, 8, "queued"), &queued);
  AwaitStats([](const auto& s) { return s.queued_requests == 1; }, "queued");
  std::thread stopper([this] { server_->Shutdown(); });
  absl::SleepFor(absl::Milliseconds(50));
  gate_->Open();
  stopper.join();
  for (auto& t : threads_) t.join();
  threads_.clear();
  EXPECT_TRUE(blocker.ok()) << blocker.status();
  EXPECT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(server_->scheduler_stats().in_flight, 0);
  EXPECT_FALSE(client_->Normalize(Rms(2, 8, "late")).ok());
}

}  // namespace
}  // namespace normd
