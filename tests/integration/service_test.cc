// normd over real gRPC on loopback: an in-process server on an ephemeral port, every op
// through the C++ client (unary and streaming), checked against the float64 reference,
// and the gRPC-level error codes.
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/load/load_gen.h"
#include "server/server.h"
#include "tests/integration/oracle.h"

namespace normd {
namespace {

using testing::ExpectMatchesOracle;

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    auto s = server::NormServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
    auto c = Client::Create(absl::StrCat("127.0.0.1:", server_->port()), {});
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = c->release();
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
  }

  HostTensor Random(DType t, std::vector<int64_t> shape, float mean = 0, float sd = 1) {
    std::normal_distribution<float> dist(mean, sd);
    HostTensor out(t, shape);
    std::vector<float> v(out.numel());
    for (auto& x : v) x = dist(rng_);
    return HostTensor::FromFloats(t, shape, v);
  }
  HostTensor Positive(DType t, std::vector<int64_t> shape) {
    HostTensor r = Random(DType::kF32, shape);
    std::vector<float> v = r.ToFloats();
    for (auto& x : v) x = 0.5f + x * x;
    return HostTensor::FromFloats(t, shape, v);
  }

  // Sends the typed call and checks it against the oracle on the request it sent.
  template <class Call>
  void Check(const v1::NormalizeRequest& request, Call call, const std::string& what) {
    absl::StatusOr<NormResult> r = call();
    ASSERT_TRUE(r.ok()) << what << ": " << r.status();
    v1::NormalizeResponse as_wire;
    as_wire.set_id(request.id());
    ToWire(r->output, as_wire.mutable_output());
    auto put = [](const std::optional<HostTensor>& t, v1::Tensor* out) {
      if (t) ToWire(*t, out);
    };
    put(r->k_output, as_wire.mutable_k_output());
    put(r->residual_sum, as_wire.mutable_residual_sum());
    put(r->batch_mean, as_wire.mutable_batch_mean());
    put(r->batch_var, as_wire.mutable_batch_var());
    put(r->running_mean, as_wire.mutable_running_mean());
    put(r->running_var, as_wire.mutable_running_var());
    EXPECT_EQ(r->backend, Backend::kCpu);
    ExpectMatchesOracle(request, as_wire, what);
  }

  static inline server::NormServer* server_ = nullptr;
  static inline Client* client_ = nullptr;
  std::mt19937_64 rng_{99};
};

const DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

TEST_F(ServiceTest, LayerNormEveryDtypeAndOption) {
  for (DType t : kDtypes) {
    LayerNormOptions o;
    o.weight = Random(DType::kF32, {6, 33}, 1, 0.2f);
    o.bias = Random(t, {6, 33});
    o.normalized_ndim = 2;
    HostTensor x = Random(t, {3, 6, 33}, 2, 3);
    Check(
        MakeRequest(x, o), [&] { return client_->LayerNorm(x, o); },
        absl::StrCat("layer_norm k=2 ", DTypeName(t)));
    LayerNormOptions res;
    res.eps_placement = EpsPlacement::kOutsideSqrt;
    res.residual =
        ResidualOptions{Random(t, {3, 6, 33}), 1.7, ResidualOptions::Placement::kAddThenNorm, true};
    Check(
        MakeRequest(x, res), [&] { return client_->LayerNorm(x, res); },
        absl::StrCat("layer_norm residual ", DTypeName(t)));
  }
}

TEST_F(ServiceTest, RmsNormEveryDtypeAndOption) {
  for (DType t : kDtypes) {
    HostTensor x = Random(t, {5, 4097});
    RmsNormOptions gemma;
    gemma.weight = Random(t, {4097}, 0, 0.1f);
    gemma.weight_offset = 1;
    gemma.partial_fraction = 0.25;
    Check(
        MakeRequest(x, gemma), [&] { return client_->RmsNorm(x, gemma); },
        absl::StrCat("rms_norm gemma partial ", DTypeName(t)));
    RmsNormOptions hf;
    hf.weight = Random(t, {4097}, 1, 0.1f);
    hf.cast_before_weight = true;
    hf.output_dtype = DType::kF32;
    hf.residual =
        ResidualOptions{Random(t, {5, 4097}), 0.5, ResidualOptions::Placement::kNormThenAdd, false};
    Check(
        MakeRequest(x, hf), [&] { return client_->RmsNorm(x, hf); },
        absl::StrCat("rms_norm hf norm-then-add ", DTypeName(t)));
  }
}

TEST_F(ServiceTest, L2AndQkNorm) {
  for (DType t : kDtypes) {
    HostTensor x = Random(t, {7, 64});
    L2NormOptions l2;
    Check(
        MakeRequest(x, l2), [&] { return client_->L2Norm(x, l2); },
        absl::StrCat("l2_norm ", DTypeName(t)));
    for (auto kind :
         {QkNormOptions::Kind::kRms, QkNormOptions::Kind::kLayer, QkNormOptions::Kind::kL2}) {
      HostTensor q = Random(t, {4, 8, 128}), k = Random(t, {4, 2, 128});
      QkNormOptions o;
      o.kind = kind;
      if (kind != QkNormOptions::Kind::kL2) {
        o.q_weight = Random(DType::kF32, {128}, 1, 0.1f);
        o.k_weight = Random(t, {128}, 1, 0.1f);
      }
      Check(
          MakeRequest(q, k, o), [&] { return client_->QkNorm(q, k, o); },
          absl::StrCat("qk_norm ", static_cast<int>(kind), " ", DTypeName(t)));
    }
  }
}

TEST_F(ServiceTest, BatchGroupInstanceNormBothLayouts) {
  for (DType t : kDtypes) {
    for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
      const std::vector<int64_t> shape = layout == Layout::kChannelsFirst
                                             ? std::vector<int64_t>{4, 6, 5, 7}
                                             : std::vector<int64_t>{4, 5, 7, 6};
      const std::string tag =
          absl::StrCat(DTypeName(t), layout == Layout::kChannelsFirst ? " NCHW" : " NHWC");
      HostTensor x = Random(t, shape, 1, 2);
      BatchNormOptions train;
      train.training = true;
      train.layout = layout;
      train.momentum = 0.2;
      train.weight = Random(t, {6}, 1, 0.2f);
      train.bias = Random(t, {6});
      train.running_mean = Random(DType::kF32, {6});
      train.running_var = Positive(DType::kF32, {6});
      Check(
          MakeRequest(x, train), [&] { return client_->BatchNorm(x, train); },
          "batch_norm train " + tag);
      BatchNormOptions eval = train;
      eval.training = false;
      Check(
          MakeRequest(x, eval), [&] { return client_->BatchNorm(x, eval); },
          "batch_norm eval " + tag);
      GroupNormOptions g;
      g.num_groups = 3;
      g.layout = layout;
      g.weight = Random(t, {6}, 1, 0.2f);
      Check(
          MakeRequest(x, g), [&] { return client_->GroupNorm(x, g); }, "group_norm " + tag);
      InstanceNormOptions in;
      in.layout = layout;
      in.bias = Random(DType::kF32, {6});
      Check(
          MakeRequest(x, in), [&] { return client_->InstanceNorm(x, in); }, "instance_norm " + tag);
      in.use_running_stats = true;
      in.running_mean = Random(t, {6});
      in.running_var = Positive(t, {6});
      Check(
          MakeRequest(x, in), [&] { return client_->InstanceNorm(x, in); },
          "instance_norm running stats " + tag);
    }
  }
}

TEST_F(ServiceTest, SpecExampleOverTheWire) {
  RmsNormOptions o;
  o.eps = 0;
  auto r = client_->RmsNorm(HostTensor::FromFloats(DType::kF32, {4}, {3, -1, 4, -2}), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<float> y = r->output.ToFloats();
  const float want[] = {1.0954f, -0.3651f, 1.4606f, -0.7303f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], want[i], 5e-5);
  EXPECT_GE(r->total_us, r->compute_us);
}

TEST_F(ServiceTest, StreamAnswersEveryIdAndSurvivesABadRequest) {
  std::vector<v1::NormalizeRequest> requests;
  HostTensor x = Random(DType::kBF16, {3, 64});
  RmsNormOptions rms;
  requests.push_back(MakeRequest(x, rms));
  LayerNormOptions ln;
  requests.push_back(MakeRequest(x, ln));
  GroupNormOptions bad;  // 3 groups do not divide C = 64... on a [3, 64] input C is 64
  bad.num_groups = 5;
  requests.push_back(MakeRequest(x, bad));
  QkNormOptions qk;
  requests.push_back(
      MakeRequest(Random(DType::kF16, {2, 4, 16}), Random(DType::kF16, {2, 1, 16}), qk));
  InstanceNormOptions in;
  requests.push_back(MakeRequest(Random(DType::kF32, {2, 3, 9}), in));
  for (size_t i = 0; i < requests.size(); ++i) requests[i].set_id(absl::StrCat("req-", i));

  std::unique_ptr<NormalizeStream> stream = client_->OpenStream();
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  for (size_t i = 0; i < requests.size(); ++i) {
    v1::NormalizeResponse response;
    ASSERT_TRUE(stream->Read(&response)) << i;
    EXPECT_EQ(response.id(), requests[i].id());
    if (i == 2) {
      EXPECT_EQ(response.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_NE(response.error().message().find("group_norm.num_groups"), std::string::npos);
      EXPECT_FALSE(response.has_output());
    } else {
      EXPECT_FALSE(response.has_error()) << response.error().message();
      ExpectMatchesOracle(requests[i], response, response.id());
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
}

// The asynchronous raw calls and the open-loop driver built on them: many calls in flight
// from one thread on two connections, each answered exactly once with its own id and the
// oracle's values; an Echo returns the input; a bad request gets its own error.
TEST_F(ServiceTest, AsyncCallsAnswerEachRequestOnceWithItsOwnResult) {
  ClientOptions own;
  own.own_connection = true;
  auto second = Client::Create(absl::StrCat("127.0.0.1:", server_->port()), own);
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<Client*> clients = {client_, second->get()};

  constexpr int kCalls = 96;
  std::vector<v1::NormalizeRequest> requests(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    RmsNormOptions rms;
    LayerNormOptions ln;
    GroupNormOptions bad;
    bad.num_groups = 5;  // does not divide C = 8
    HostTensor x = Random(i % 2 ? DType::kBF16 : DType::kF32, {1 + i % 3, 8});
    requests[i] = i % 3 == 0   ? MakeRequest(x, rms)
                  : i % 3 == 1 ? MakeRequest(x, ln)
                               : MakeRequest(x, bad);
    requests[i].set_id(absl::StrCat("async-", i));
  }
  absl::Mutex mu;
  std::vector<int> answers(kCalls, 0);  // +1 per Normalize answer, +100 per Echo answer
  int remaining = 2 * kCalls;
  std::vector<absl::StatusOr<v1::NormalizeResponse>> normalized(kCalls), echoed(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    clients[i % 2]->NormalizeAsync(requests[i], [&, i](absl::StatusOr<v1::NormalizeResponse> r) {
      absl::MutexLock l(&mu);
      ++answers[i];
      --remaining;
      normalized[i] = std::move(r);
    });
    clients[(i + 1) % 2]->EchoAsync(requests[i], [&, i](absl::StatusOr<v1::NormalizeResponse> r) {
      absl::MutexLock l(&mu);
      answers[i] += 100;
      --remaining;
      echoed[i] = std::move(r);
    });
  }
  {
    absl::MutexLock l(&mu);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](int* n) { return *n <= 0; }, &remaining),
                        absl::Seconds(30));
  }
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(answers[i], 101) << i << ": each call must be answered exactly once";
    ASSERT_TRUE(echoed[i].ok()) << echoed[i].status();
    EXPECT_EQ(echoed[i]->id(), requests[i].id());
    EXPECT_EQ(echoed[i]->output().data(), requests[i].input().data());
    if (i % 3 == 2) {
      EXPECT_EQ(normalized[i].status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(normalized[i].status().message().find("group_norm.num_groups"), std::string::npos);
    } else {
      ASSERT_TRUE(normalized[i].ok()) << i << ": " << normalized[i].status();
      EXPECT_EQ(normalized[i]->id(), requests[i].id());
      ExpectMatchesOracle(requests[i], *normalized[i], requests[i].id());
    }
  }

  // The open-loop driver: every scheduled call sent once and answered once, ids intact.
  OpenLoopOptions open;
  open.rate = 2000;
  open.start = absl::Now();
  open.end = open.start + absl::Milliseconds(100);
  open.max_in_flight = 8;
  const LoadStats stats = OpenLoop(clients, requests[0], open);
  EXPECT_EQ(stats.sent, 200);
  EXPECT_EQ(stats.ok, 200);
  EXPECT_EQ(stats.failed, 0);
  EXPECT_EQ(stats.wrong_id, 0);
  EXPECT_EQ(stats.latency_us.count(), 200);
  // A bad request: every call answered with the server's code, none lost.
  open.start = absl::Now();
  open.end = open.start + absl::Milliseconds(100);
  const LoadStats bad = OpenLoop(clients, requests[2], open);
  EXPECT_EQ(bad.sent, 200);
  EXPECT_EQ(bad.ok, 0);
  EXPECT_EQ(bad.failed, 200);
  EXPECT_EQ(bad.by_code.count("OK"), 0u);
  ASSERT_EQ(bad.by_code.count("INVALID_ARGUMENT"), 1u);
  EXPECT_EQ(bad.by_code.at("INVALID_ARGUMENT").count(), 200);

  // The closed-loop callers, unary and streaming: every request sent is answered once;
  // a stream reports a bad request's error by its code.
  for (bool stream : {false, true}) {
    for (int which : {0, 2}) {
      ClosedLoopOptions closed;
      closed.callers = 4;
      closed.stream = stream;
      closed.end = absl::Now() + absl::Milliseconds(100);
      const LoadStats c = ClosedLoop(clients, requests[which], closed);
      const std::string what = absl::StrCat(stream ? "stream" : "unary", " request ", which);
      EXPECT_GE(c.sent, 4) << what;
      EXPECT_EQ(c.wrong_id, 0) << what;
      EXPECT_EQ(c.latency_us.count(), c.sent) << what;
      if (which == 0) {
        EXPECT_EQ(c.ok, c.sent) << what;
      } else {
        EXPECT_EQ(c.failed, c.sent) << what;
        EXPECT_EQ(c.by_code.at("INVALID_ARGUMENT").count(), c.sent) << what;
      }
    }
  }
}

// One request at a time on one stream, so the server recycles each written slot for the
// next read: requests with and without weight, bias, residual and k, of other shapes and
// dtypes, and a bad one in between, must each be answered as if alone (nothing left over
// from the request or response before).
TEST_F(ServiceTest, PingPongStreamCarriesNothingOverBetweenRequests) {
  std::vector<v1::NormalizeRequest> requests;
  for (int round = 0; round < 3; ++round) {
    LayerNormOptions ln;
    ln.weight = Random(DType::kF32, {16});
    ln.bias = Random(DType::kF32, {16});
    ResidualOptions res;
    res.skip = Random(DType::kF32, {4, 16});
    res.return_sum = true;
    ln.residual = res;
    requests.push_back(MakeRequest(Random(DType::kF32, {4, 16}), ln));
    requests.push_back(MakeRequest(Random(DType::kBF16, {2, 24}), RmsNormOptions{}));
    GroupNormOptions bad;
    bad.num_groups = 5;
    requests.push_back(MakeRequest(Random(DType::kF32, {2, 8, 3}), bad));
    QkNormOptions qk;
    requests.push_back(
        MakeRequest(Random(DType::kF16, {1, 2, 8}), Random(DType::kF16, {1, 1, 8}), qk));
    requests.push_back(MakeRequest(Random(DType::kF32, {3, 5}), L2NormOptions{}));
  }
  std::unique_ptr<NormalizeStream> stream = client_->OpenStream();
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_id(absl::StrCat("pp-", i));
    ASSERT_TRUE(stream->Write(requests[i]));
    v1::NormalizeResponse response;
    ASSERT_TRUE(stream->Read(&response)) << i;
    EXPECT_EQ(response.id(), requests[i].id());
    if (i % 5 == 2) {
      EXPECT_EQ(response.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_FALSE(response.has_output());
      continue;
    }
    EXPECT_FALSE(response.has_error()) << response.error().message();
    EXPECT_EQ(response.has_residual_sum(), i % 5 == 0) << i;
    EXPECT_EQ(response.has_k_output(), i % 5 == 3) << i;
    ExpectMatchesOracle(requests[i], response, response.id());
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceTest, ErrorsMapToTheirGrpcCodes) {
  v1::NormalizeRequest bad = MakeRequest(Random(DType::kF32, {2, 4}), LayerNormOptions{});
  bad.mutable_input()->mutable_data()->resize(5);
  auto r = client_->Normalize(bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("input.data: expected 32 bytes"), std::string::npos);

  RmsNormOptions cuda;
  cuda.backend = Backend::kCuda;
  auto c = client_->RmsNorm(Random(DType::kF32, {2, 4}), cuda);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);

  auto empty = client_->RmsNorm(HostTensor(DType::kF16, {0, 8}), RmsNormOptions{});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->output.shape, (std::vector<int64_t>{0, 8}));

  auto deep = client_->GetDeepNormCoefficients(v1::ARCHITECTURE_DECODER, 0, 0);
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServiceLimitsTest, OversizedMessagesGetResourceExhausted) {
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_message_bytes = 1 << 20;
  auto s = server::NormServer::Start(options);
  ASSERT_TRUE(s.ok()) << s.status();
  ClientOptions co;
  co.chunking.threshold_bytes = 0;  // whole messages: the server's limit itself
  auto c = Client::Create(absl::StrCat("ipv4:127.0.0.1:", (*s)->port()), co);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->RmsNorm(HostTensor(DType::kF32, {512, 1024}), RmsNormOptions{});  // 2 MiB
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // The default client sends the same row-wise request as chunks, each under the limit.
  auto chunked = (*Client::Create(absl::StrCat("ipv4:127.0.0.1:", (*s)->port()), {}))
                     ->RmsNorm(HostTensor(DType::kF32, {512, 1024}), RmsNormOptions{});
  EXPECT_TRUE(chunked.ok()) << chunked.status();
  auto ok = (*c)->RmsNorm(HostTensor(DType::kF32, {16, 1024}), RmsNormOptions{});
  EXPECT_TRUE(ok.ok()) << ok.status();
  auto info = (*c)->GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->max_message_bytes(), 1 << 20);
}

}  // namespace
}  // namespace normd
