// The client's chunked calls (ClientOptions::Chunking) against a real server: large
// row-wise requests sent as row chunks over NormalizeStream give answers bit-identical to
// one whole Normalize call (uneven last chunk, several trailing normalized dims, residual
// outputs, another output dtype, QK-norm with q and k of different shapes), the chunks
// really travel as several requests, errors name the whole request's fields, a server
// that is not there is UNAVAILABLE, and the channel ops go whole. Outputs of 64 KiB and
// more leave the server from the kernel's own buffer (server/answer_wire.h), whole and in
// chunks, and a caller's response is reused.
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "server/server.h"

namespace normd {
namespace {

class ChunkedCallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    auto s = server::NormServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
    const std::string target = absl::StrCat("127.0.0.1:", server_->port());
    ClientOptions whole;
    whole.chunking.threshold_bytes = 0;  // never chunk
    ClientOptions chunked;
    chunked.chunking.threshold_bytes = 1;  // always, in small uneven chunks
    chunked.chunking.chunk_bytes = 3000;
    chunked.chunking.window = 3;
    ClientOptions big;  // chunks whose outputs pass the server's zero-copy threshold
    big.chunking.threshold_bytes = 1;
    big.chunking.chunk_bytes = 100 << 10;
    big.chunking.window = 2;
    whole_ = Client::Create(target, whole)->release();
    chunked_ = Client::Create(target, chunked)->release();
    big_ = Client::Create(target, big)->release();
  }
  static void TearDownTestSuite() {
    delete whole_;
    delete chunked_;
    delete big_;
    delete server_;
  }

  HostTensor Random(DType t, std::vector<int64_t> shape) {
    std::normal_distribution<float> dist(0.3f, 1.5f);
    HostTensor out(t, shape);
    std::vector<float> v(out.numel());
    for (float& x : v) x = dist(rng_);
    return HostTensor::FromFloats(t, shape, v);
  }

  // Requests the server answered so far (every op, every code), from its metrics.
  static int64_t Answered() {
    int64_t n = 0;
    for (absl::string_view line : absl::StrSplit(server_->MetricsText(), '\n')) {
      if (!absl::StartsWith(line, "normd_requests_total{")) continue;
      int64_t v = 0;
      if (absl::SimpleAtoi(line.substr(line.rfind(' ') + 1), &v)) n += v;
    }
    return n;
  }

  // The request through both clients: the same bytes in every output, and the chunked
  // call took `chunks` requests (at least two).
  void ExpectBitIdentical(const v1::NormalizeRequest& request, const std::string& what,
                          Client* chunker = chunked_) {
    absl::StatusOr<v1::NormalizeResponse> whole = whole_->Normalize(request);
    ASSERT_TRUE(whole.ok()) << what << ": " << whole.status();
    const int64_t before = Answered();
    absl::StatusOr<v1::NormalizeResponse> chunked = chunker->Normalize(request);
    ASSERT_TRUE(chunked.ok()) << what << ": " << chunked.status();
    EXPECT_GE(Answered() - before, 2) << what << ": not sent in chunks";
    for (const auto& [name, a, b] :
         {std::tuple{"output", &whole->output(), &chunked->output()},
          std::tuple{"k_output", &whole->k_output(), &chunked->k_output()},
          std::tuple{"residual_sum", &whole->residual_sum(), &chunked->residual_sum()}}) {
      EXPECT_EQ(a->dtype(), b->dtype()) << what << " " << name;
      EXPECT_EQ(std::vector<int64_t>(a->shape().begin(), a->shape().end()),
                std::vector<int64_t>(b->shape().begin(), b->shape().end()))
          << what << " " << name;
      EXPECT_TRUE(a->data() == b->data()) << what << " " << name << ": bytes differ";
    }
    EXPECT_EQ(whole->id(), chunked->id());
  }

  static inline server::NormServer* server_ = nullptr;
  static inline Client* whole_ = nullptr;
  static inline Client* chunked_ = nullptr;
  static inline Client* big_ = nullptr;
  std::mt19937_64 rng_{5};
};

TEST_F(ChunkedCallTest, LayerNormOverTwoDimsWithAffineAndUnevenLastChunk) {
  LayerNormOptions o;
  o.normalized_ndim = 2;
  o.weight = Random(DType::kF32, {3, 40});
  o.bias = Random(DType::kF32, {3, 40});
  v1::NormalizeRequest r = MakeRequest(Random(DType::kF32, {37, 3, 40}), o);  // 37 rows
  r.set_id("ln");
  ExpectBitIdentical(r, "layer_norm");
}

TEST_F(ChunkedCallTest, RmsNormResidualSumAndOtherOutputDtype) {
  for (DType t : {DType::kBF16, DType::kF16, DType::kF32}) {
    RmsNormOptions o;
    o.weight = Random(t, {96});
    o.weight_offset = 1.0;
    o.partial_fraction = 0.5;
    o.residual = ResidualOptions{};
    o.residual->skip = Random(t, {5, 13, 96});
    o.residual->alpha = 0.7;
    o.residual->return_sum = true;
    o.output_dtype = DType::kF32;
    ExpectBitIdentical(MakeRequest(Random(t, {5, 13, 96}), o), DTypeName(t));
  }
}

TEST_F(ChunkedCallTest, NormThenAddResidualAndL2) {
  LayerNormOptions o;
  o.residual = ResidualOptions{};
  o.residual->skip = Random(DType::kF16, {61, 64});
  o.residual->placement = ResidualOptions::Placement::kNormThenAdd;
  ExpectBitIdentical(MakeRequest(Random(DType::kF16, {61, 64}), o), "norm_then_add");
  ExpectBitIdentical(MakeRequest(Random(DType::kF32, {29, 100}), L2NormOptions{}), "l2");
}

TEST_F(ChunkedCallTest, QkNormWithDifferentQAndK) {
  QkNormOptions o;
  o.q_weight = Random(DType::kF32, {64});
  o.k_weight = Random(DType::kBF16, {32});
  v1::NormalizeRequest r =
      MakeRequest(Random(DType::kF32, {2, 9, 8, 64}), Random(DType::kBF16, {2, 9, 3, 32}), o);
  ExpectBitIdentical(r, "qk_norm");
}

TEST_F(ChunkedCallTest, LargeOutputsWholeAndInLargeChunks) {
  // 1.5 MiB of f32 rows: the whole call's outputs, and each 100 KiB chunk's, go out of the
  // server as slices of their buffers; the answers match the small chunks' bit for bit.
  RmsNormOptions o;
  o.weight = Random(DType::kF32, {4096});
  o.residual = ResidualOptions{};
  o.residual->skip = Random(DType::kF32, {96, 4096});
  o.residual->return_sum = true;
  const v1::NormalizeRequest rms = MakeRequest(Random(DType::kF32, {96, 4096}), o);
  ExpectBitIdentical(rms, "rms_norm, large chunks", big_);
  ExpectBitIdentical(rms, "rms_norm, small chunks", chunked_);
  QkNormOptions qk;
  const v1::NormalizeRequest qkr =
      MakeRequest(Random(DType::kF32, {4, 64, 8, 128}), Random(DType::kF32, {4, 64, 2, 128}), qk);
  ExpectBitIdentical(qkr, "qk_norm, large chunks", big_);
}

TEST_F(ChunkedCallTest, AnswersIntoTheCallersResponse) {
  const v1::NormalizeRequest request =
      MakeRequest(Random(DType::kBF16, {64, 2048}), LayerNormOptions{});
  absl::StatusOr<v1::NormalizeResponse> whole = whole_->Normalize(request);
  ASSERT_TRUE(whole.ok()) << whole.status();
  v1::NormalizeResponse response;
  response.mutable_residual_sum()->set_data("left from before");
  ASSERT_TRUE(big_->Normalize(request, &response).ok());
  EXPECT_TRUE(response.output().data() == whole->output().data());
  EXPECT_FALSE(response.has_residual_sum());  // nothing stays from the last answer
  const char* buffer = response.output().data().data();
  ASSERT_TRUE(big_->Normalize(request, &response).ok());
  EXPECT_TRUE(response.output().data() == whole->output().data());
  EXPECT_EQ(response.output().data().data(), buffer) << "the caller's buffer was not reused";
  EXPECT_EQ(
      std::vector<int64_t>(response.output().shape().begin(), response.output().shape().end()),
      (std::vector<int64_t>{64, 2048}));
}

TEST_F(ChunkedCallTest, TypedAndAsyncCallsChunkToo) {
  const HostTensor x = Random(DType::kBF16, {40, 128});
  RmsNormOptions o;
  o.weight = Random(DType::kBF16, {128});
  absl::StatusOr<NormResult> whole = whole_->RmsNorm(x, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<NormResult> blocking = chunked_->RmsNorm(x, o);
  ASSERT_TRUE(blocking.ok()) << blocking.status();
  EXPECT_TRUE(blocking->output.bytes == whole->output.bytes);
  EXPECT_EQ(blocking->output.shape, whole->output.shape);
  absl::StatusOr<NormResult> future = chunked_->RmsNormAsync(x, o).Get();
  ASSERT_TRUE(future.ok()) << future.status();
  EXPECT_TRUE(future->output.bytes == whole->output.bytes);
}

TEST_F(ChunkedCallTest, ErrorsNameTheWholeRequestsField) {
  LayerNormOptions o;
  o.weight = Random(DType::kF32, {63});  // the input's rows have 64
  const v1::NormalizeRequest request = MakeRequest(Random(DType::kF32, {50, 64}), o);
  absl::StatusOr<v1::NormalizeResponse> r = chunked_->Normalize(request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(r.status()), "layer_norm.weight");
  EXPECT_EQ(ErrorField(r.status()), ErrorField(whole_->Normalize(request).status()));
}

TEST_F(ChunkedCallTest, NoServerIsUnavailableForBlockingAndAsyncCalls) {
  // Nothing listens on the port: the blocking call (on its own completion queue) and the
  // asynchronous one (a callback reactor) both end UNAVAILABLE, neither hangs.
  int port;
  {
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    auto gone = server::NormServer::Start(options);
    ASSERT_TRUE(gone.ok()) << gone.status();
    port = (*gone)->port();
  }
  ClientOptions options;
  options.chunking.threshold_bytes = 1;
  options.chunking.chunk_bytes = 3000;
  options.retry.max_attempts = 1;
  auto client = Client::Create(absl::StrCat("127.0.0.1:", port), options);
  ASSERT_TRUE(client.ok()) << client.status();
  const v1::NormalizeRequest request =
      MakeRequest(Random(DType::kF32, {50, 64}), LayerNormOptions{});
  absl::StatusOr<v1::NormalizeResponse> blocking = (*client)->Normalize(request);
  EXPECT_EQ(blocking.status().code(), absl::StatusCode::kUnavailable) << blocking.status();
  absl::StatusOr<NormResult> async = (*client)->CallAsync(request).Get();
  EXPECT_EQ(async.status().code(), absl::StatusCode::kUnavailable) << async.status();
}

TEST_F(ChunkedCallTest, ChannelOpsGoWhole) {
  GroupNormOptions o;
  o.num_groups = 2;
  const v1::NormalizeRequest request = MakeRequest(Random(DType::kF32, {4, 8, 300}), o);
  const int64_t before = Answered();
  absl::StatusOr<v1::NormalizeResponse> chunked = chunked_->Normalize(request);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_EQ(Answered() - before, 1);
  absl::StatusOr<v1::NormalizeResponse> whole = whole_->Normalize(request);
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->output().data() == chunked->output().data());
}

}  // namespace
}  // namespace normd
