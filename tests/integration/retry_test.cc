// The client library's retries (ClientOptions::Retry, gRPC's retry policy): UNAVAILABLE is
// retried with backoff up to max_attempts and then reported; a retry that finds room
// succeeds; other failures are not retried. The server's gate decides when room appears.
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/testing/gated_backend.h"
#include "server/server.h"
#include "tests/integration/gated_server.h"

namespace normd {
namespace {

using testing::GatedBackend;

class RetryTest : public ::testing::Test {
 protected:
  // A gated server (gated_server.h) with a queue of one: one request in the closed backend
  // and one queued fill it; the next is UNAVAILABLE.
  void SetUp() override {
    server::ServerOptions options;
    options.scheduler.max_queue_requests = 1;
    absl::StatusOr<testing::GatedServer> g = testing::StartGatedServer(options);
    ASSERT_TRUE(g.ok()) << g.status();
    gate_ = g->gate;
    server_ = std::move(g->server);
    target_ = g->target;
  }
  void TearDown() override {
    gate_->Open();
    for (auto& t : threads_) t.join();
  }

  static v1::NormalizeRequest Rms() {
    RmsNormOptions o;
    o.backend = Backend::kCpu;
    return MakeRequest(HostTensor(DType::kF32, {1, 8}), o);
  }
  std::unique_ptr<Client> NewClient(int max_attempts) {
    ClientOptions o;
    o.retry.max_attempts = max_attempts;
    auto c = Client::Create(target_, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }
  // Fills the server: one request held in the backend, then one queued (sent one after
  // the other: sent together, the executor would batch them into one backend run).
  void Fill(Client* c) {
    gate_->Close();
    threads_.emplace_back([c] { (void)c->Normalize(Rms()); });
    gate_->AwaitEntered(1);
    threads_.emplace_back([c] { (void)c->Normalize(Rms()); });
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (server_->scheduler_stats().queued_requests < 1) {
      ASSERT_LT(absl::Now(), until);
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  int64_t Rejected() const { return server_->scheduler_stats().rejected_full; }

  std::shared_ptr<GatedBackend> gate_;
  std::unique_ptr<server::NormServer> server_;
  std::string target_;
  std::vector<std::thread> threads_;
};

TEST_F(RetryTest, UnavailableIsRetriedUpToMaxAttemptsThenReported) {
  auto filler = NewClient(1);
  Fill(filler.get());
  auto client = NewClient(3);
  auto r = client->Normalize(Rms());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(Rejected(), 3);  // three attempts, each refused by the full queue
  auto once = NewClient(1);
  EXPECT_EQ(once->Normalize(Rms()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Rejected(), 4);  // max_attempts 1: no retry
}

TEST_F(RetryTest, ARetryThatFindsRoomSucceeds) {
  auto filler = NewClient(1);
  Fill(filler.get());
  auto client = NewClient(5);
  absl::StatusOr<v1::NormalizeResponse> r;
  std::thread call([&] { r = client->Normalize(Rms()); });
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (Rejected() < 1) {  // the first attempt was refused; the next waits in backoff
    ASSERT_LT(absl::Now(), until);
    absl::SleepFor(absl::Microseconds(200));
  }
  gate_->Open();
  call.join();
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_GE(Rejected(), 1);
}

TEST_F(RetryTest, OtherFailuresAreNotRetried) {
  auto client = NewClient(5);
  gate_->FailWith(absl::InternalError("device lost (test)"));
  EXPECT_EQ(client->Normalize(Rms()).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(gate_->entered(), 1);  // one backend run: INTERNAL is not retried
  v1::NormalizeRequest bad = Rms();
  bad.mutable_rms_norm()->set_eps(-1);
  EXPECT_EQ(client->Normalize(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace normd
