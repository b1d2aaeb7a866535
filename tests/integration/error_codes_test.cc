// The error-code policy, one test per row of the README's error table, over real gRPC on
// loopback: each code normd returns, in the situation the table names, as a client sees
// it (with the field for INVALID_ARGUMENT read from the google.rpc.BadRequest details).
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
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

// Normalize and NormalizeStream parse their messages themselves (server/answer_wire.h):
// bytes that are not a NormalizeRequest are INVALID_ARGUMENT, and the stream goes on.
TEST_F(ErrorCodesTest, BytesThatAreNoRequestAreInvalidArgument) {
  Start();
  auto channel = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  const std::string garbage = "\x0a\xff\xff\xff\xff\x0f";  // a field longer than the message
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  std::promise<grpc::Status> unary;
  stub.UnaryCall(&context, "/normd.v1.NormService/Normalize", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) { unary.set_value(s); });
  const grpc::Status s = unary.get_future().get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  // On a stream: the garbage's answer carries the error, the next request is answered.
  class TwoWrites : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    TwoWrites(grpc::ByteBuffer first, grpc::ByteBuffer second) {
      writes_[0] = std::move(first);
      writes_[1] = std::move(second);
    }
    void Go() {
      StartWrite(&writes_[0]);
      StartRead(&reads_[0]);
      StartCall();
    }
    void OnWriteDone(bool ok) override {
      if (ok && ++written_ == 1) {
        StartWrite(&writes_[1]);
      } else {
        StartWritesDone();
      }
    }
    void OnReadDone(bool ok) override {
      if (ok && ++read_ == 1) StartRead(&reads_[1]);
    }
    void OnDone(const grpc::Status& s) override { done_.set_value(s); }
    grpc::ByteBuffer writes_[2], reads_[2];
    int written_ = 0, read_ = 0;
    std::promise<grpc::Status> done_;
  };
  grpc::ByteBuffer good;
  bool own = false;
  ASSERT_TRUE(grpc::SerializationTraits<v1::NormalizeRequest>::Serialize(Rms(), &good, &own).ok());
  TwoWrites reactor(request, good);
  grpc::ClientContext stream_context;
  stub.PrepareBidiStreamingCall(&stream_context, "/normd.v1.NormService/NormalizeStream",
                                grpc::StubOptions(), &reactor);
  reactor.Go();
  const grpc::Status stream_status = reactor.done_.get_future().get();
  ASSERT_TRUE(stream_status.ok()) << stream_status.error_message();
  ASSERT_EQ(reactor.read_, 2);
  v1::NormalizeResponse first, second;
  ASSERT_TRUE(
      grpc::SerializationTraits<v1::NormalizeResponse>::Deserialize(&reactor.reads_[0], &first)
          .ok());
  ASSERT_TRUE(
      grpc::SerializationTraits<v1::NormalizeResponse>::Deserialize(&reactor.reads_[1], &second)
          .ok());
  EXPECT_EQ(first.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_FALSE(second.has_error());
  EXPECT_TRUE(second.has_output());
}

}  // namespace
}  // namespace normd
