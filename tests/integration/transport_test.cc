// The completion-queue transport beyond the default of one thread, and normd's own
// grpc.health.v1 service, over real gRPC on loopback.
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/load/load_gen.h"
#include "server/server.h"
#include "tests/integration/oracle.h"

namespace normd {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::unique_ptr<server::NormServer> StartServer(int transport_threads) {
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.transport_threads = transport_threads;
  auto s = server::NormServer::Start(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(TransportTest, SeveralTransportThreadsAnswerEveryCallWithItsOwnResult) {
  std::unique_ptr<server::NormServer> server = StartServer(3);
  ASSERT_NE(server, nullptr);
  ClientOptions own;
  own.own_connection = true;  // one connection each: calls land on different queues
  std::vector<std::unique_ptr<Client>> owned;
  std::vector<Client*> clients;
  for (int i = 0; i < 3; ++i) {
    auto c = Client::Create(absl::StrCat("127.0.0.1:", server->port()), own);
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(c->get());
    owned.push_back(*std::move(c));
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  constexpr int kCalls = 120;
  std::vector<v1::NormalizeRequest> requests(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    const std::vector<int64_t> shape = {1 + i % 4, 64 + 8 * (i % 5)};
    std::vector<float> v(shape[0] * shape[1]);
    for (float& x : v) x = dist(rng);
    const HostTensor x = HostTensor::FromFloats(i % 2 ? DType::kBF16 : DType::kF32, shape, v);
    requests[i] = i % 2 ? MakeRequest(x, RmsNormOptions{}) : MakeRequest(x, LayerNormOptions{});
    requests[i].set_id(absl::StrCat("t-", i));
  }
  absl::Mutex mu;
  int remaining = kCalls;
  std::vector<absl::StatusOr<v1::NormalizeResponse>> answers(kCalls);
  std::vector<int> times(kCalls, 0);
  for (int i = 0; i < kCalls; ++i) {
    clients[i % 3]->NormalizeAsync(requests[i], [&, i](absl::StatusOr<v1::NormalizeResponse> r) {
      absl::MutexLock l(&mu);
      answers[i] = std::move(r);
      ++times[i];
      --remaining;
    });
  }
  {
    absl::MutexLock l(&mu);
    auto all_in = [&] { return remaining == 0; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_in), absl::Seconds(30)));
  }
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(times[i], 1) << i;
    ASSERT_TRUE(answers[i].ok()) << i << ": " << answers[i].status();
    EXPECT_EQ(answers[i]->id(), requests[i].id());
    testing::ExpectMatchesOracle(requests[i], *answers[i], requests[i].id());
  }
  // Streams and unary calls from every connection at once: each answered, ids intact.
  for (bool stream : {false, true}) {
    ClosedLoopOptions closed;
    closed.callers = 12;
    closed.stream = stream;
    closed.end = absl::Now() + absl::Milliseconds(200);
    const LoadStats c = ClosedLoop(clients, requests[0], closed);
    EXPECT_GE(c.sent, 12) << stream;
    EXPECT_EQ(c.ok, c.sent) << stream;
    EXPECT_EQ(c.wrong_id, 0) << stream;
  }
}

TEST(HealthTest, ChecksAndWatchesFollowTheServerUntilShutdown) {
  std::unique_ptr<server::NormServer> server = StartServer(0);
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                     grpc::InsecureChannelCredentials());
  std::unique_ptr<Health::Stub> health = Health::NewStub(channel);
  const auto check = [&](const std::string& service, HealthCheckResponse* r) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    HealthCheckRequest request;
    request.set_service(service);
    return health->Check(&context, request, r);
  };
  for (const std::string service : {"", "normd.v1.NormService"}) {
    HealthCheckResponse r;
    const grpc::Status s = check(service, &r);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(r.status(), HealthCheckResponse::SERVING) << service;
  }
  HealthCheckResponse unknown;
  const grpc::Status s = check("no.such.Service", &unknown);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no.such.Service"), std::string::npos) << s.error_message();

  // A watch sees SERVING at once, then NOT_SERVING when the server drains, and ends.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  HealthCheckRequest watch_request;
  watch_request.set_service("normd.v1.NormService");
  auto watch = health->Watch(&watch_context, watch_request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);
  std::thread stopper([&] { server->Shutdown(); });
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&update));
  EXPECT_TRUE(watch->Finish().ok());
  stopper.join();
}

}  // namespace
}  // namespace normd
