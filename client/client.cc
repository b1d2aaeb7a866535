#include "normd/client.h"

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chunking.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace normd {
namespace {

constexpr char kBadRequestTypeUrl[] = "type.googleapis.com/google.rpc.BadRequest";
// The trailer in which normd returns gRPC's grpc-previous-rpc-attempts request header.
constexpr char kPreviousAttemptsTrailer[] = "normd-previous-rpc-attempts";

class GrpcNormalizeStream final : public NormalizeStream {
 public:
  // Opens the stream with `open(context)`: NormalizeStream or EchoStream of a stub.
  // `prepare` sets the context up (credentials) first.
  template <class Prepare, class Open>
  GrpcNormalizeStream(Prepare prepare, Open open) {
    prepare(&context_);
    stream_ = open(&context_);
  }
  bool Write(const v1::NormalizeRequest& request) override { return stream_->Write(request); }
  bool Read(v1::NormalizeResponse* response) override { return stream_->Read(response); }
  absl::Status Finish() override {
    stream_->WritesDone();
    v1::NormalizeResponse drain;
    while (stream_->Read(&drain)) {
    }
    return StatusFromGrpc(stream_->Finish());
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::NormalizeRequest, v1::NormalizeResponse>> stream_;
};

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good())
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first line of the token file that is neither blank nor a comment.
absl::StatusOr<std::string> ReadToken(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "token_file");
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() && line.front() != '#') return std::string(line);
  }
  return absl::InvalidArgumentError(absl::StrCat("token_file: '", path, "' holds no token"));
}

// Plaintext, or TLS with the CA (and the client certificate for mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientOptions& o, grpc::ChannelArguments* args) {
  if (o.tls_ca_file.empty() && o.tls_cert_file.empty() && o.tls_key_file.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (o.tls_ca_file.empty()) {
    return absl::InvalidArgumentError("tls_ca_file: required for TLS (with a client certificate)");
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert_file, tls_key_file: give both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [path, out, what] :
       {std::tuple{&o.tls_ca_file, &ssl.pem_root_certs, "tls_ca_file"},
        std::tuple{&o.tls_cert_file, &ssl.pem_cert_chain, "tls_cert_file"},
        std::tuple{&o.tls_key_file, &ssl.pem_private_key, "tls_key_file"}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = ReadFile(*path, what);
    if (!pem.ok()) return pem.status();
    *out = *std::move(pem);
  }
  if (!o.tls_server_name.empty()) {
    args->SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, o.tls_server_name);
  }
  return grpc::SslCredentials(ssl);
}

// The channel's service config: round_robin, and for both of normd's services the retry
// policy on UNAVAILABLE with its budget (ClientOptions::Retry).
std::string ServiceConfig(const ClientOptions::Retry& r) {
  auto seconds = [](absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), "s"); };
  std::string method_config;
  if (r.max_attempts > 1) {
    method_config = absl::StrCat(
        R"(, "methodConfig": [{"name": [{"service": "normd.v1.NormService"},)",
        R"( {"service": "normd.v1.DiagnosticsService"}], "retryPolicy": {"maxAttempts": )",
        r.max_attempts, R"(, "initialBackoff": ")", seconds(r.initial_backoff),
        R"(", "maxBackoff": ")", seconds(r.max_backoff), R"(", "backoffMultiplier": )",
        r.backoff_multiplier, R"(, "retryableStatusCodes": ["UNAVAILABLE"]}}],)",
        R"( "retryThrottling": {"maxTokens": )", r.budget_max_tokens, R"(, "tokenRatio": )",
        r.budget_token_ratio, "}");
  }
  return absl::StrCat(R"({"loadBalancingConfig": [{"round_robin": {}}])", method_config, "}");
}

}  // namespace

std::string ErrorField(const absl::Status& status) {
  const auto payload = status.GetPayload(kBadRequestTypeUrl);  // absl::optional
  google::rpc::BadRequest bad_request;
  if (!payload || !bad_request.ParseFromString(std::string(*payload)) ||
      bad_request.field_violations_size() == 0) {
    return "";
  }
  return bad_request.field_violations(0).field();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const std::string& target,
                                                       const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("target: expected a gRPC target, got ''");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (options.retry.max_attempts < 1 || options.retry.max_attempts > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry.max_attempts: expected 1 to 5, got ", options.retry.max_attempts));
  }
  // round_robin over several resolved addresses (ipv4:a,b or DNS with many records) and
  // the retry policy, in a service config that the resolver may not replace.
  args.SetServiceConfigJSON(ServiceConfig(options.retry));
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, options.retry.buffer_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // pings on idle connections too
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  for (const auto& [name, value] : options.channel_args) args.SetInt(name, value);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(options, &args);
  if (!credentials.ok()) return credentials.status();
  std::string authorization;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadToken(options.token_file);
    if (!token.ok()) return token.status();
    authorization = absl::StrCat("Bearer ", *token);
  }
  if (options.channels < 1 || options.channels > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("channels: expected 1 to 1024, got ", options.channels));
  }
  // Channels with equal arguments share one connection; a pool wants one each.
  if (options.channels > 1) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<Stubs> pool;
  for (int i = 0; i < options.channels; ++i) {
    auto channel = grpc::CreateCustomChannel(target, *credentials, args);
    if (channel == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("target: cannot use '", target, "'"));
    pool.push_back({v1::NormService::NewStub(channel), v1::DiagnosticsService::NewStub(channel),
                    grpc::health::v1::Health::NewStub(channel),
                    std::make_unique<grpc::GenericStub>(channel)});
  }
  return std::unique_ptr<Client>(new Client(std::move(pool), options, std::move(authorization)));
}

Client::Stubs& Client::Next() {
  return pool_[next_.fetch_add(1, std::memory_order_relaxed) % pool_.size()];
}

void CallHandle::Cancel() {
  if (state_ == nullptr) return;
  absl::MutexLock l(&state_->mu);
  if (state_->context != nullptr) state_->context->TryCancel();
}

CallInfo Client::CallInfoOf(const grpc::ClientContext& context) {
  CallInfo info;
  info.peer = context.peer();
  const auto& trailers = context.GetServerTrailingMetadata();
  if (auto it = trailers.find(kPreviousAttemptsTrailer); it != trailers.end()) {
    int n = 0;
    if (absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &n)) {
      info.previous_attempts = n;
    }
  }
  return info;
}

void Client::Prepare(grpc::ClientContext* context, const CallOptions& c) const {
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMicroseconds(c.timeout.value_or(options_.timeout)));
  Authorize(context);
}

void Client::Authorize(grpc::ClientContext* context) const {
  if (!authorization_.empty()) context->AddMetadata("authorization", authorization_);
}

absl::StatusOr<v1::NormalizeResponse> Client::Normalize(const v1::NormalizeRequest& request,
                                                        const CallOptions& c) {
  v1::NormalizeResponse response;
  if (absl::Status s = Normalize(request, &response, c); !s.ok()) return s;
  return response;
}

absl::Status Client::Normalize(const v1::NormalizeRequest& request, v1::NormalizeResponse* response,
                               const CallOptions& c) {
  if (std::optional<ChunkPlan> plan = PlanFor(request)) {
    // The chunks point into `request`: it must stay until gRPC let go of the last of them,
    // which a call that ended early may do after its answer.
    std::promise<void> released;
    std::future<void> unused = released.get_future();
    absl::Status s = NormalizeChunkedOnQueue(
        std::make_shared<const ChunkSource>(v1::NormalizeRequest(), &request,
                                            [&released] { released.set_value(); }),
        *plan, c, response);
    unused.wait();
    return s;
  }
  grpc::ClientContext context;
  Prepare(&context, c);
  absl::Status s = StatusFromGrpc(Next().norm->Normalize(&context, request, response));
  if (!s.ok()) NoteFailure(s);
  return s;
}

namespace {
Client::InfoCallback DropInfo(Client::Callback done) {
  return [done = std::move(done)](absl::StatusOr<v1::NormalizeResponse> r, const CallInfo&) {
    done(std::move(r));
  };
}
}  // namespace

CallHandle Client::NormalizeAsync(v1::NormalizeRequest request, Callback done,
                                  const CallOptions& c) {
  return StartAsync(false, std::move(request), DropInfo(std::move(done)), c);
}

CallHandle Client::EchoAsync(v1::NormalizeRequest request, Callback done, const CallOptions& c) {
  return StartAsync(true, std::move(request), DropInfo(std::move(done)), c);
}

CallHandle Client::NormalizeAsync(v1::NormalizeRequest request, InfoCallback done,
                                  const CallOptions& c) {
  return StartAsync(false, std::move(request), std::move(done), c);
}

CallHandle Client::EchoAsync(v1::NormalizeRequest request, InfoCallback done,
                             const CallOptions& c) {
  return StartAsync(true, std::move(request), std::move(done), c);
}

void Client::BindStreamAsync(grpc::ClientContext* context, StreamReactor* reactor, bool echo) {
  Authorize(context);
  if (echo) {
    Next().diagnostics->async()->EchoStream(context, reactor);
  } else {
    Next().norm->async()->NormalizeStream(context, reactor);
  }
}

std::unique_ptr<Client::QueueReader> Client::StartOnQueue(bool echo, grpc::ClientContext* context,
                                                          const v1::NormalizeRequest& request,
                                                          grpc::CompletionQueue* cq,
                                                          v1::NormalizeResponse* response,
                                                          grpc::Status* status, void* tag) {
  Prepare(context);
  Stubs& stubs = Next();
  std::unique_ptr<QueueReader> reader = echo ? stubs.diagnostics->AsyncEcho(context, request, cq)
                                             : stubs.norm->AsyncNormalize(context, request, cq);
  reader->Finish(response, status, tag);
  return reader;
}

CallHandle Client::StartAsync(bool echo, v1::NormalizeRequest request, InfoCallback done,
                              const CallOptions& c) {
  if (!echo) {
    if (std::optional<ChunkPlan> plan = PlanFor(request)) {
      return StartChunked(std::make_shared<const ChunkSource>(std::move(request), nullptr, nullptr),
                          *std::move(plan), std::move(done), c);
    }
  }
  // What the call reads and writes must outlive it: owned here, freed by the callback.
  struct Call {
    grpc::ClientContext context;
    v1::NormalizeRequest request;
    v1::NormalizeResponse response;
    InfoCallback done;
    std::shared_ptr<CallHandle::State> handle = std::make_shared<CallHandle::State>();
    Client* client;
  };
  auto* call = new Call;
  call->client = this;
  Prepare(&call->context, c);
  call->request = std::move(request);
  call->done = std::move(done);
  {
    absl::MutexLock l(&call->handle->mu);
    call->handle->context = &call->context;
  }
  CallHandle handle;
  handle.state_ = call->handle;
  auto on_done = [call, echo](grpc::Status s) {
    {
      absl::MutexLock l(&call->handle->mu);  // a Cancel from now on finds no call
      call->handle->context = nullptr;
    }
    const CallInfo info = CallInfoOf(call->context);
    // The call's context holds a reference to the channel; it is freed before `done`
    // runs. Otherwise a caller that destroys the Client as soon as every `done` has run
    // could leave the channel's last reference to this gRPC thread, and gRPC 1.51 then
    // tears down its callback threads' queue from under this very thread (an ASan
    // double free in the tests).
    InfoCallback done = std::move(call->done);
    absl::StatusOr<v1::NormalizeResponse> result =
        s.ok() ? absl::StatusOr<v1::NormalizeResponse>(std::move(call->response))
               : StatusFromGrpc(s);
    Client* client = call->client;
    delete call;
    if (!result.ok() && !echo) client->NoteFailure(result.status());
    done(std::move(result), info);
  };
  Stubs& stubs = Next();
  if (echo) {
    stubs.diagnostics->async()->Echo(&call->context, &call->request, &call->response,
                                     std::move(on_done));
  } else {
    stubs.norm->async()->Normalize(&call->context, &call->request, &call->response,
                                   std::move(on_done));
  }
  return handle;
}

absl::StatusOr<v1::NormalizeResponse> Client::Echo(const v1::NormalizeRequest& request,
                                                   const CallOptions& c) {
  grpc::ClientContext context;
  Prepare(&context, c);
  v1::NormalizeResponse response;
  if (absl::Status s = StatusFromGrpc(Next().diagnostics->Echo(&context, request, &response));
      !s.ok())
    return s;
  return response;
}

std::unique_ptr<NormalizeStream> Client::OpenStream() {
  return std::make_unique<GrpcNormalizeStream>(
      [this](grpc::ClientContext* c) { Authorize(c); },
      [this](grpc::ClientContext* c) { return Next().norm->NormalizeStream(c); });
}

std::unique_ptr<NormalizeStream> Client::OpenEchoStream() {
  return std::make_unique<GrpcNormalizeStream>(
      [this](grpc::ClientContext* c) { Authorize(c); },
      [this](grpc::ClientContext* c) { return Next().diagnostics->EchoStream(c); });
}

absl::StatusOr<v1::GetServerInfoResponse> Client::GetServerInfo() {
  grpc::ClientContext context;
  Prepare(&context);
  v1::GetServerInfoResponse info;
  if (absl::Status s = StatusFromGrpc(Next().norm->GetServerInfo(&context, {}, &info)); !s.ok())
    return s;
  return info;
}

absl::StatusOr<bool> Client::CheckHealth(const std::string& service) {
  grpc::ClientContext context;
  Prepare(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  if (absl::Status s = StatusFromGrpc(Next().health->Check(&context, request, &response)); !s.ok())
    return s;
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<v1::GetDeepNormCoefficientsResponse> Client::GetDeepNormCoefficients(
    v1::Architecture arch, int encoder_layers, int decoder_layers) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::GetDeepNormCoefficientsRequest request;
  request.set_architecture(arch);
  request.set_encoder_layers(encoder_layers);
  request.set_decoder_layers(decoder_layers);
  v1::GetDeepNormCoefficientsResponse out;
  if (absl::Status s =
          StatusFromGrpc(Next().norm->GetDeepNormCoefficients(&context, request, &out));
      !s.ok())
    return s;
  return out;
}

}  // namespace normd
