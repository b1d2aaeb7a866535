// The shared-memory data plane over real gRPC: tensors named by SharedMemoryRef in
// regions the client made and registered, answers bit-identical to the same request
// carrying bytes, in place; every reference error INVALID_ARGUMENT naming its field (and
// the server unharmed); registration errors; concurrent clients with separate regions; a
// region unregistered while a request that uses it is inside the backend; a restarted
// server and the client's re-registration; --no-shared-memory.
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/shared_memory.h"
#include "server/server.h"
#include "tests/integration/gated_server.h"

namespace normd {
namespace {

HostTensor Ramp(DType t, std::vector<int64_t> shape, float scale = 0.01f) {
  HostTensor out(t, shape);
  std::vector<float> v(out.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i) * scale) * 3;
  return HostTensor::FromFloats(t, shape, v);
}

absl::StatusOr<std::unique_ptr<server::NormServer>> StartServer(bool shared_memory = true,
                                                                int port = 0) {
  server::ServerOptions options;
  options.listen = absl::StrCat("127.0.0.1:", port);
  options.enable_shared_memory = shared_memory;
  return server::NormServer::Start(options);
}

std::unique_ptr<Client> Connect(int port) {
  return *Client::Create(absl::StrCat("127.0.0.1:", port), {});
}

class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = StartServer();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    client_ = Connect(server_->port());
    auto r = SharedMemoryRegion::Create(absl::StrCat("r", ++count_), 1 << 20);
    ASSERT_TRUE(r.ok()) << r.status();
    region_ = std::make_unique<SharedMemoryRegion>(*std::move(r));
    ASSERT_TRUE(client_->RegisterSharedMemory(*region_).ok());
  }

  // `request`'s input moved into the region at `at`, the output at `out_at`.
  v1::NormalizeRequest InRegion(v1::NormalizeRequest request, int64_t at, int64_t out_at) {
    const HostTensor x = FromWire(request.input());
    *request.mutable_input() = *region_->Place(x, at);
    const int64_t out_bytes = static_cast<int64_t>(x.bytes.size());
    *request.mutable_output_shared_memory() = region_->Ref(out_at, out_bytes);
    return request;
  }

  void ExpectField(const v1::NormalizeRequest& request, const std::string& field) {
    absl::StatusOr<v1::NormalizeResponse> r = client_->Normalize(request);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(ErrorField(r.status()), field) << r.status();
  }

  static inline int count_ = 0;
  std::unique_ptr<server::NormServer> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<SharedMemoryRegion> region_;
};

TEST_F(SharedMemoryTest, AnswersInTheRegionBitIdenticalToBytesOnTheWire) {
  LayerNormOptions o;
  o.weight = Ramp(DType::kF32, {256}, 0.3f);
  const v1::NormalizeRequest plain = MakeRequest(Ramp(DType::kBF16, {33, 256}), o);
  absl::StatusOr<v1::NormalizeResponse> want = client_->Normalize(plain);
  ASSERT_TRUE(want.ok());
  const int64_t bytes = 33 * 256 * 2;
  for (int64_t out_at : {bytes, int64_t{0}}) {  // apart, then in place
    absl::StatusOr<v1::NormalizeResponse> got = client_->Normalize(InRegion(plain, 0, out_at));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->output().data().empty());
    EXPECT_EQ(got->output().shared_memory().offset(), out_at);
    absl::StatusOr<HostTensor> y = region_->Read(got->output());
    ASSERT_TRUE(y.ok());
    EXPECT_TRUE(y->bytes == want->output().data()) << "output at " << out_at;
    EXPECT_EQ(y->shape, (std::vector<int64_t>{33, 256}));
  }
}

TEST_F(SharedMemoryTest, QkNormAndResidualOutputsInTheRegion) {
  QkNormOptions qo;
  v1::NormalizeRequest qk = MakeRequest(Ramp(DType::kF16, {4, 8, 64}), Ramp(DType::kF16, {4, 2, 64}), qo);
  absl::StatusOr<v1::NormalizeResponse> want = client_->Normalize(qk);
  ASSERT_TRUE(want.ok());
  const int64_t qb = 4 * 8 * 64 * 2, kb = 4 * 2 * 64 * 2;
  *qk.mutable_qk_norm()->mutable_q() = *region_->Place(FromWire(qk.qk_norm().q()), 0);
  *qk.mutable_qk_norm()->mutable_k() = *region_->Place(FromWire(qk.qk_norm().k()), qb);
  *qk.mutable_output_shared_memory() = region_->Ref(0, qb);  // q in place
  *qk.mutable_k_output_shared_memory() = region_->Ref(qb + kb, kb);
  absl::StatusOr<v1::NormalizeResponse> got = client_->Normalize(qk);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(region_->Read(got->output())->bytes == want->output().data());
  EXPECT_TRUE(region_->Read(got->k_output())->bytes == want->k_output().data());

  RmsNormOptions ro;
  ro.residual = ResidualOptions{};
  ro.residual->skip = Ramp(DType::kF32, {16, 128}, 0.7f);
  ro.residual->return_sum = true;
  v1::NormalizeRequest res = MakeRequest(Ramp(DType::kF32, {16, 128}), ro);
  absl::StatusOr<v1::NormalizeResponse> want_res = client_->Normalize(res);
  ASSERT_TRUE(want_res.ok());
  const int64_t b = 16 * 128 * 4;
  res = InRegion(res, 0, b);
  *res.mutable_rms_norm()->mutable_residual()->mutable_skip() =
      *region_->Place(ro.residual->skip, 2 * b);
  *res.mutable_residual_sum_shared_memory() = region_->Ref(3 * b, b);
  got = client_->Normalize(res);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(region_->Read(got->output())->bytes == want_res->output().data());
  EXPECT_TRUE(region_->Read(got->residual_sum())->bytes == want_res->residual_sum().data());
}

TEST_F(SharedMemoryTest, EveryBadReferenceIsInvalidArgumentNamingItsField) {
  const v1::NormalizeRequest plain = MakeRequest(Ramp(DType::kF32, {8, 64}), RmsNormOptions{});
  const int64_t b = 8 * 64 * 4;
  v1::NormalizeRequest r = InRegion(plain, 0, b);
  r.mutable_input()->mutable_shared_memory()->set_region("nobody");
  ExpectField(r, "input.shared_memory.region");
  r = InRegion(plain, 0, b);
  r.mutable_input()->mutable_shared_memory()->set_offset((1 << 20) - b + 4);  // past the end
  ExpectField(r, "input.shared_memory.offset");
  r = InRegion(plain, 0, b);
  r.mutable_input()->mutable_shared_memory()->set_offset(-4);
  ExpectField(r, "input.shared_memory.offset");
  r = InRegion(plain, 0, b);
  r.mutable_input()->mutable_shared_memory()->set_byte_size(b - 4);
  ExpectField(r, "input.shared_memory.byte_size");
  r = InRegion(plain, 0, b);
  r.mutable_input()->set_data("x");
  ExpectField(r, "input.data");
  r = InRegion(plain, 0, b / 2);  // overlaps the input, not exactly
  ExpectField(r, "output_shared_memory");
  r = InRegion(plain, 0, (1 << 20) - b / 2);
  ExpectField(r, "output_shared_memory.offset");
  r = InRegion(plain, 0, b);
  *r.mutable_k_output_shared_memory() = region_->Ref(2 * b, b);
  ExpectField(r, "k_output_shared_memory");
  r = InRegion(plain, 0, b);
  *r.mutable_residual_sum_shared_memory() = region_->Ref(2 * b, b);
  ExpectField(r, "residual_sum_shared_memory");
  // A residual's sum over the normalized output; an output over the skip.
  RmsNormOptions ro;
  ro.residual = ResidualOptions{};
  ro.residual->skip = Ramp(DType::kF32, {8, 64});
  ro.residual->return_sum = true;
  r = InRegion(MakeRequest(Ramp(DType::kF32, {8, 64}), ro), 0, b);
  *r.mutable_residual_sum_shared_memory() = region_->Ref(b, b);
  ExpectField(r, "residual_sum_shared_memory");
  r = InRegion(MakeRequest(Ramp(DType::kF32, {8, 64}), ro), 0, 2 * b);
  *r.mutable_rms_norm()->mutable_residual()->mutable_skip() = *region_->Place(ro.residual->skip, 2 * b);
  ExpectField(r, "output_shared_memory");
  // A channel op may not write over its own input.
  GroupNormOptions go;
  ExpectField(InRegion(MakeRequest(Ramp(DType::kF32, {2, 4, 64}), go), 0, 0),
              "output_shared_memory");
  // The server is unharmed.
  EXPECT_TRUE(client_->Normalize(InRegion(plain, 0, b)).ok());
}

TEST_F(SharedMemoryTest, RegistrationErrorsAndStatus) {
  v1::RegisterSharedMemoryRequest r;
  r.set_name(region_->name());
  r.set_key(region_->key());
  r.set_byte_size(64);
  EXPECT_EQ(client_->RegisterSharedMemory(r).code(), absl::StatusCode::kAlreadyExists);
  r.set_name("other");
  r.set_key("/normd-test-no-such-object");
  EXPECT_EQ(client_->RegisterSharedMemory(r).code(), absl::StatusCode::kNotFound);
  r.set_key("../etc/passwd");
  absl::Status s = client_->RegisterSharedMemory(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(s), "key");
  r.set_key(region_->key());
  r.set_offset(1 << 19);
  r.set_byte_size((1 << 19) + 1);
  s = client_->RegisterSharedMemory(r);
  EXPECT_EQ(ErrorField(s), "byte_size") << s;
  r.set_byte_size(1 << 19);  // the second half, at an offset
  ASSERT_TRUE(client_->RegisterSharedMemory(r).ok());
  absl::StatusOr<v1::SharedMemoryStatusResponse> status = client_->SharedMemoryStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->regions_size(), 2);
  EXPECT_EQ(status->regions(0).name(), "other");
  EXPECT_EQ(status->regions(0).offset(), 1 << 19);
  EXPECT_EQ(client_->UnregisterSharedMemory("absent").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->SharedMemoryStatus("absent").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(client_->UnregisterSharedMemory("").ok());
  EXPECT_EQ(client_->SharedMemoryStatus()->regions_size(), 0);
}

TEST_F(SharedMemoryTest, ConcurrentClientsWithSeparateRegions) {
  const v1::NormalizeRequest plain = MakeRequest(Ramp(DType::kF32, {64, 512}), LayerNormOptions{});
  const std::string want = client_->Normalize(plain)->output().data();
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Client> c = Connect(server_->port());
      auto region = SharedMemoryRegion::Create(absl::StrCat("c", t, "-", count_), 1 << 20);
      if (!region.ok() || !c->RegisterSharedMemory(*region).ok()) return;
      v1::NormalizeRequest r = plain;
      *r.mutable_input() = *region->Place(FromWire(plain.input()), 0);
      *r.mutable_output_shared_memory() = region->Ref(1 << 19, 64 * 512 * 4);
      for (int i = 0; i < 40; ++i) {
        absl::StatusOr<v1::NormalizeResponse> got = c->Normalize(r);
        if (got.ok() && region->Read(got->output())->bytes == want) ++good;
        std::memset(region->bytes().data() + (1 << 19), 0, 64 * 512 * 4);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), 160);
}

TEST_F(SharedMemoryTest, ServerRestartFailsOnceThenTheClientHasRegisteredAgain) {
  const v1::NormalizeRequest r =
      InRegion(MakeRequest(Ramp(DType::kF32, {4, 64}), RmsNormOptions{}), 0, 1024);
  ASSERT_TRUE(client_->Normalize(r).ok());
  const int port = server_->port();
  server_.reset();
  auto s = StartServer(true, port);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = *std::move(s);
  absl::StatusOr<v1::NormalizeResponse> first = client_->Normalize(r);
  for (int i = 0; i < 50 && first.status().code() == absl::StatusCode::kUnavailable; ++i) {
    absl::SleepFor(absl::Milliseconds(100));  // the channel reconnecting
    first = client_->Normalize(r);
  }
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(ErrorField(first.status()), "input.shared_memory.region") << first.status();
  EXPECT_NE(first.status().message().find("not registered"), std::string::npos);
  absl::StatusOr<v1::NormalizeResponse> next = client_->Normalize(r);
  for (int i = 0; i < 50 && !next.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    next = client_->Normalize(r);
  }
  EXPECT_TRUE(next.ok()) << next.status();
}

TEST(SharedMemoryOffTest, NoSharedMemoryRefusesRegionsAndReferences) {
  auto s = StartServer(false);
  ASSERT_TRUE(s.ok());
  std::unique_ptr<Client> c = Connect((*s)->port());
  auto region = SharedMemoryRegion::Create("off", 4096);
  ASSERT_TRUE(region.ok());
  EXPECT_EQ(c->RegisterSharedMemory(*region).code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(c->GetServerInfo()->shared_memory());
  v1::NormalizeRequest r = MakeRequest(Ramp(DType::kF32, {2, 8}), L2NormOptions{});
  *r.mutable_input() = *region->Place(FromWire(r.input()), 0);
  absl::StatusOr<v1::NormalizeResponse> got = c->Normalize(r);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(got.status()), "input.shared_memory");
}

TEST(SharedMemoryInFlightTest, UnregisteringKeepsTheMappingUntilTheRequestFinishes) {
  absl::StatusOr<testing::GatedServer> g = testing::StartGatedServer();
  ASSERT_TRUE(g.ok()) << g.status();
  std::unique_ptr<Client> c = *Client::Create(g->target, {});
  auto region = SharedMemoryRegion::Create("inflight", 1 << 16);
  ASSERT_TRUE(region.ok());
  ASSERT_TRUE(c->RegisterSharedMemory(*region).ok());
  const v1::NormalizeRequest plain = MakeRequest(Ramp(DType::kF32, {8, 128}), RmsNormOptions{});
  v1::NormalizeRequest r = plain;
  *r.mutable_input() = *region->Place(FromWire(plain.input()), 0);
  *r.mutable_output_shared_memory() = region->Ref(8 * 128 * 4, 8 * 128 * 4);
  g->gate->Close();
  PendingResult pending = c->CallAsync(r);
  g->gate->AwaitEntered(1);  // inside the backend, holding the region
  EXPECT_EQ(c->SharedMemoryStatus("inflight")->regions(0).requests_in_flight(), 1);
  ASSERT_TRUE(c->UnregisterSharedMemory("inflight").ok());
  EXPECT_EQ(c->SharedMemoryStatus()->regions_size(), 0);
  absl::StatusOr<v1::NormalizeResponse> refused = c->Normalize(r);
  EXPECT_EQ(ErrorField(refused.status()), "input.shared_memory.region");
  g->gate->Open();
  absl::StatusOr<NormResult> done = pending.Get();
  ASSERT_TRUE(done.ok()) << done.status();
  g->gate->Open();
  ClientOptions whole;
  const std::string want = (*Client::Create(g->target, whole))->Normalize(plain)->output().data();
  const std::string got(reinterpret_cast<const char*>(region->bytes().data()) + 8 * 128 * 4,
                        8 * 128 * 4);
  EXPECT_TRUE(got == want);
}

}  // namespace
}  // namespace normd
