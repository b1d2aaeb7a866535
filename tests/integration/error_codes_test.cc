// The error-code policy, one test per row of the README's error table, over real gRPC on
// loopback: each code normd returns, in the situation the table names, as a client sees
// it (with the field for INVALID_ARGUMENT read from the google.rpc.BadRequest details).
#include <fstream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/testing/gated_backend.h"
#include "server/server.h"
#include "tests/integration/gated_server.h"

namespace normd {
namespace {

using testing::GatedBackend;

class ErrorCodesTest : public ::testing::Test {
 protected:
  // A gated server (gated_server.h): a test decides when queued requests run.
  void Start(server::ServerOptions options = {}) {
    absl::StatusOr<testing::GatedServer> g = testing::StartGatedServer(options);
    ASSERT_TRUE(g.ok()) << g.status();
    gate_ = g->gate;
    server_ = std::move(g->server);
    target_ = g->target;
    auto c = Client::Create(target_, {});
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  void TearDown() override {
    if (gate_) gate_->Open();
    for (auto& t : threads_) t.join();
  }

  static v1::NormalizeRequest Rms(int64_t cols = 8) {
    RmsNormOptions o;
    o.backend = Backend::kCpu;
    return MakeRequest(HostTensor(DType::kF32, {1, cols}), o);
  }
  // Parks one request inside the closed backend: what comes next waits in the queue.
  void BlockExecutor() {
    gate_->Close();
    threads_.emplace_back([this] { (void)client_->Normalize(Rms()); });
    gate_->AwaitEntered(1);
  }
  void AwaitQueued(int64_t n) {
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (server_->scheduler_stats().queued_requests < n) {
      ASSERT_LT(absl::Now(), until) << "timed out waiting for " << n << " queued";
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  std::shared_ptr<GatedBackend> gate_;
  std::unique_ptr<server::NormServer> server_;
  std::unique_ptr<Client> client_;
  std::string target_;
  std::vector<std::thread> threads_;
};

TEST_F(ErrorCodesTest, InvalidArgumentNamesTheMalformedField) {
  Start();
  RmsNormOptions o;
  o.eps = -1;
  auto r = client_->RmsNorm(HostTensor(DType::kF32, {2, 4}), o);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(ErrorField(r.status()), "rms_norm.eps");
}

TEST_F(ErrorCodesTest, InvalidArgumentForAnUnknownEnumNumber) {
  Start();
  v1::NormalizeRequest request = Rms();
  request.mutable_rms_norm()->set_eps_placement(static_cast<v1::EpsPlacement>(42));
  auto r = client_->Normalize(request);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(ErrorField(r.status()), "rms_norm.eps_placement");
}

TEST_F(ErrorCodesTest, UnimplementedForAServiceTheServerDoesNotOffer) {
  server::ServerOptions options;
  options.enable_diagnostics = false;
  Start(options);
  auto r = client_->Echo(Rms());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_TRUE(client_->Normalize(Rms()).ok());  // NormService is still served
}

TEST_F(ErrorCodesTest, FailedPreconditionForCudaWithoutACudaBackend) {
  Start();
  v1::NormalizeRequest request = Rms();
  request.set_backend(v1::BACKEND_CUDA);
  auto r = client_->Normalize(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

TEST_F(ErrorCodesTest, ResourceExhaustedForAMessageOverTheLimit) {
  server::ServerOptions options;
  options.max_message_bytes = 64 << 10;
  Start(options);
  auto r = client_->Normalize(Rms(32 << 10));  // 128 KiB of input
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
}

TEST_F(ErrorCodesTest, UnavailableWhenTheQueueIsFull) {
  server::ServerOptions options;
  options.scheduler.max_queue_requests = 1;
  Start(options);
  BlockExecutor();
  threads_.emplace_back([this] { (void)client_->Normalize(Rms()); });
  AwaitQueued(1);
  auto r = client_->Normalize(Rms());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST_F(ErrorCodesTest, DeadlineExceededWhileQueued) {
  Start();
  BlockExecutor();
  ClientOptions short_deadline;
  short_deadline.timeout = absl::Milliseconds(200);
  auto c = Client::Create(target_, short_deadline);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Normalize(Rms());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST_F(ErrorCodesTest, CancelledWhenTheClientCancels) {
  Start();
  BlockExecutor();
  auto stub =
      v1::NormService::NewStub(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::NormalizeResponse response;
  std::thread canceller([&] {
    AwaitQueued(1);
    context.TryCancel();
  });
  const grpc::Status s = stub->Normalize(&context, Rms(), &response);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  // The server took the cancelled request out of its queue.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (server_->scheduler_stats().cancelled < 1) {
    ASSERT_LT(absl::Now(), until) << "the server never dropped the cancelled request";
    absl::SleepFor(absl::Milliseconds(1));
  }
}

TEST_F(ErrorCodesTest, UnauthenticatedWithoutAnAcceptedToken) {
  const std::string dir = ::testing::TempDir();
  const std::string tokens = dir + "/error_codes_tokens", mine = dir + "/error_codes_token";
  std::ofstream(tokens) << "accepted\n";
  std::ofstream(mine) << "not-accepted\n";
  server::ServerOptions options;
  options.auth_token_file = tokens;
  Start(options);
  auto r = client_->Normalize(Rms());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated) << r.status();
  ClientOptions with_token;
  with_token.token_file = mine;
  auto wrong = Client::Create(target_, with_token);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ((*wrong)->Normalize(Rms()).status().code(), absl::StatusCode::kUnauthenticated);
  std::ofstream(mine) << "accepted\n";
  auto right = Client::Create(target_, with_token);
  ASSERT_TRUE(right.ok());
  EXPECT_TRUE((*right)->Normalize(Rms()).ok());
}

TEST_F(ErrorCodesTest, InternalWhenTheBackendFails) {
  Start();
  gate_->FailWith(absl::InternalError("device lost (test)"));
  auto r = client_->Normalize(Rms());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_TRUE(r.status().message().find("device lost") != absl::string_view::npos);
}

}  // namespace
}  // namespace normd
