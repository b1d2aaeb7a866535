// normd's C++ client: one typed method per op over HostTensor, plus the raw
// request/response call and a bidirectional stream.
//
//   auto client = normd::Client::Create("dns:///normd:50051", {});
//   normd::RmsNormOptions opt;
//   opt.weight = w;
//   absl::StatusOr<normd::NormResult> r = (*client)->RmsNorm(x, opt);
//   if (r.ok()) use(r->output);
//
// Errors are absl::Status with the server's gRPC code and message, and the server's error
// details (google.rpc.Status) as payloads keyed by their type URL: ErrorField() reads the
// request field a malformed request got wrong. Any gRPC target string
// works ("host:port", "dns:///name:port", "ipv4:127.0.0.1:5001,127.0.0.1:5002"; several
// addresses are balanced round-robin).
//
// Every op also has two asynchronous forms, with a per-call deadline and cancellation:
//
//   normd::PendingResult p = client->RmsNormAsync(x, opt, {.timeout = absl::Milliseconds(50)});
//   ... p.Cancel();                      // or
//   absl::StatusOr<normd::NormResult> r = p.Get();
//   client->RmsNormAsync(x, opt, [](absl::StatusOr<normd::NormResult> r) { ... });
//
// Thread safety: a Client is safe for concurrent use from multiple threads, and so are
// CallHandle and PendingResult; a NormalizeStream is not (one writer and one reader at a
// time, as gRPC's).
#ifndef NORMD_CLIENT_CLIENT_H_
#define NORMD_CLIENT_CLIENT_H_

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "normd/requests.h"
#include "normd/shared_memory.h"
#include "normd/v1/normd.grpc.pb.h"
#include "normd/version.h"

namespace normd {

struct ChunkPlan;    // chunking.h, private
struct ChunkSource;  // chunk_wire.h, private

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(30);  // deadline of each call
  int max_message_bytes = 256 << 20;
  // gRPC shares one connection among channels to the same target with the same options;
  // true gives this client a connection of its own (load generators open several, as
  // many independent callers would).
  bool own_connection = false;
  // A channel pool: this many channels, each with a connection of its own, and calls
  // take turns over them. One HTTP/2 connection serializes its frames on one socket and
  // one gRPC poller; at hundreds of concurrent calls several carry more.
  int channels = 1;
  // Transport security. tls_ca_file set: TLS, the server's certificate checked against
  // this PEM CA bundle; tls_cert_file and tls_key_file: the client certificate that
  // mutual TLS asks for; tls_server_name: the name to check the server's certificate for
  // instead of the target's host (and to send as SNI).
  std::string tls_ca_file, tls_cert_file, tls_key_file, tls_server_name;
  // A file holding the bearer token (its first line that is neither blank nor a comment),
  // sent as `authorization: Bearer <token>` on every call; empty: none.
  std::string token_file;
  // Retries, by gRPC's retry policy in the channel's service config: a call that fails
  // UNAVAILABLE before the server answered (a replica gone, a full queue, a shutdown) is
  // tried again, on the next address of the target (round_robin), after an exponential
  // backoff, up to max_attempts attempts in all (gRPC caps it at 5). retryThrottling keeps a
  // budget: when more than about half the recent calls fail, retries stop until calls
  // succeed again. Every normd call is idempotent, a pure function of its request.
  // RESOURCE_EXHAUSTED (a message over a limit) is never retried: it would fail again.
  struct Retry {
    int max_attempts = 5;  // 1: no retries
    absl::Duration initial_backoff = absl::Milliseconds(20);
    absl::Duration max_backoff = absl::Seconds(1);
    double backoff_multiplier = 2;
    int budget_max_tokens = 100;  // retryThrottling.maxTokens
    double budget_token_ratio = 0.1;
    // gRPC keeps a call's request for a retry only up to this many bytes (its default is
    // 256 KiB); a larger request is committed once sent and a failure is final.
    int buffer_bytes = 16 << 20;
  } retry;
  // Keepalive pings on a connection idle this long (with or without calls), so that a
  // dead peer is noticed; at or above the server's --keepalive-min-ping-interval (10 s by
  // default), which answers more frequent pings with GOAWAY.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Large tensors: a row-wise request (LayerNorm, RMSNorm, L2, QK-norm, also with a
  // residual) whose row tensors hold at least `threshold_bytes` goes as row chunks of
  // about `chunk_bytes`, pipelined over one NormalizeStream with up to `window` chunks in
  // flight, and the answers are put back together: bit-identical to one Normalize call,
  // but the server computes early chunks while later ones are still on the wire, and no
  // HTTP/2 message is larger than a chunk. Applies to Normalize, NormalizeAsync, CallAsync
  // and the typed calls (not Echo, streams or StartOnQueue). The channel ops, whose
  // statistics span rows, always go whole. threshold_bytes 0: never chunk. The defaults
  // are measured (BENCHMARKS.md, "Large tensors"). The thread that reads the answers
  // allocates gRPC's receive buffers in its malloc arena and frees them once copied out;
  // with glibc, a process that receives large answers faults part of those pages in on
  // every call unless the arena keeps its top: mallopt(M_TOP_PAD, 16 << 20), as normbench
  // does (BENCHMARKS.md, "Large tensors", has the measurement).
  // More of gRPC's integer channel arguments (name, value), set last (transport tuning;
  // BENCHMARKS.md, "Large tensors", has the A/B of those tried).
  std::vector<std::pair<std::string, int>> channel_args;
  struct Chunking {
    int64_t threshold_bytes = 1 << 20;
    int64_t chunk_bytes = 256 << 10;
    int window = 16;
  } chunking;
};

// Options of one call.
struct CallOptions {
  std::optional<absl::Duration> timeout;  // the call's deadline; default ClientOptions::timeout
};

// What gRPC said about a finished unary call besides its answer.
struct CallInfo {
  std::string peer;           // the replica that answered ("ipv4:127.0.0.1:5001"), or ""
  int previous_attempts = 0;  // attempts retried before the answer (0 without a retry)
};

// A call in flight. Cancel() ends it CANCELLED unless it was already answered; safe from
// any thread at any time, also after the call ended (then it does nothing). A
// default-constructed handle refers to no call.
class CallHandle {
 public:
  void Cancel();

 private:
  friend class Client;
  friend class ChunkedCall;
  struct State {
    absl::Mutex mu;
    grpc::ClientContext* context ABSL_GUARDED_BY(mu) = nullptr;  // null once answered
  };
  std::shared_ptr<State> state_;
};

// The answer of an asynchronous call, to wait for (a std::future with a Cancel).
class PendingResult {
 public:
  PendingResult(std::future<absl::StatusOr<NormResult>> future, CallHandle call)
      : future_(std::move(future)), call_(std::move(call)) {}
  // Waits for the answer and returns it; call once.
  absl::StatusOr<NormResult> Get() { return future_.get(); }
  // True once the answer is there (Get will not block).
  bool WaitFor(absl::Duration d) {
    return future_.wait_for(absl::ToChronoMicroseconds(d)) == std::future_status::ready;
  }
  void Cancel() { call_.Cancel(); }

 private:
  std::future<absl::StatusOr<NormResult>> future_;
  CallHandle call_;
};

// A bidirectional NormalizeStream: write requests, read one response per request.
class NormalizeStream {
 public:
  virtual ~NormalizeStream() = default;
  virtual bool Write(const v1::NormalizeRequest& request) = 0;
  virtual bool Read(v1::NormalizeResponse* response) = 0;
  virtual absl::Status Finish() = 0;  // half-closes, drains, returns the call's status
};

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Create(const std::string& target,
                                                        const ClientOptions& options);
  ~Client();

  // Blocking calls.
  absl::StatusOr<NormResult> LayerNorm(const HostTensor& x, const LayerNormOptions& o,
                                       const CallOptions& c = {});
  absl::StatusOr<NormResult> RmsNorm(const HostTensor& x, const RmsNormOptions& o,
                                     const CallOptions& c = {});
  absl::StatusOr<NormResult> L2Norm(const HostTensor& x, const L2NormOptions& o,
                                    const CallOptions& c = {});
  absl::StatusOr<NormResult> BatchNorm(const HostTensor& x, const BatchNormOptions& o,
                                       const CallOptions& c = {});
  absl::StatusOr<NormResult> GroupNorm(const HostTensor& x, const GroupNormOptions& o,
                                       const CallOptions& c = {});
  absl::StatusOr<NormResult> InstanceNorm(const HostTensor& x, const InstanceNormOptions& o,
                                          const CallOptions& c = {});
  absl::StatusOr<NormResult> QkNorm(const HostTensor& q, const HostTensor& k,
                                    const QkNormOptions& o, const CallOptions& c = {});

  // Asynchronous calls with a callback: return at once; `done` runs exactly once, on a
  // gRPC thread, and must not block. Destroy the Client only once every `done` has run.
  using ResultCallback = std::function<void(absl::StatusOr<NormResult>)>;
  CallHandle LayerNormAsync(const HostTensor& x, const LayerNormOptions& o, ResultCallback done,
                            const CallOptions& c = {});
  CallHandle RmsNormAsync(const HostTensor& x, const RmsNormOptions& o, ResultCallback done,
                          const CallOptions& c = {});
  CallHandle L2NormAsync(const HostTensor& x, const L2NormOptions& o, ResultCallback done,
                         const CallOptions& c = {});
  CallHandle BatchNormAsync(const HostTensor& x, const BatchNormOptions& o, ResultCallback done,
                            const CallOptions& c = {});
  CallHandle GroupNormAsync(const HostTensor& x, const GroupNormOptions& o, ResultCallback done,
                            const CallOptions& c = {});
  CallHandle InstanceNormAsync(const HostTensor& x, const InstanceNormOptions& o,
                               ResultCallback done, const CallOptions& c = {});
  CallHandle QkNormAsync(const HostTensor& q, const HostTensor& k, const QkNormOptions& o,
                         ResultCallback done, const CallOptions& c = {});
  // Asynchronous calls with a future. Get the answer before destroying the Client.
  PendingResult LayerNormAsync(const HostTensor& x, const LayerNormOptions& o,
                               const CallOptions& c = {});
  PendingResult RmsNormAsync(const HostTensor& x, const RmsNormOptions& o,
                             const CallOptions& c = {});
  PendingResult L2NormAsync(const HostTensor& x, const L2NormOptions& o, const CallOptions& c = {});
  PendingResult BatchNormAsync(const HostTensor& x, const BatchNormOptions& o,
                               const CallOptions& c = {});
  PendingResult GroupNormAsync(const HostTensor& x, const GroupNormOptions& o,
                               const CallOptions& c = {});
  PendingResult InstanceNormAsync(const HostTensor& x, const InstanceNormOptions& o,
                                  const CallOptions& c = {});
  PendingResult QkNormAsync(const HostTensor& q, const HostTensor& k, const QkNormOptions& o,
                            const CallOptions& c = {});
  // Any request, answered as a NormResult (what the typed methods above send).
  CallHandle CallAsync(v1::NormalizeRequest request, ResultCallback done,
                       const CallOptions& c = {});
  PendingResult CallAsync(v1::NormalizeRequest request, const CallOptions& c = {});

  // The raw call: any request, the response as the server sent it.
  absl::StatusOr<v1::NormalizeResponse> Normalize(const v1::NormalizeRequest& request,
                                                  const CallOptions& c = {});
  // The same, answered into `response`: a chunked call (above the chunking threshold)
  // writes the outputs into the buffers `response` already holds, so a caller that passes
  // the same response again allocates nothing and touches no fresh pages.
  absl::Status Normalize(const v1::NormalizeRequest& request, v1::NormalizeResponse* response,
                         const CallOptions& c = {});
  // Responses come in request order; several requests may be written before reading.
  std::unique_ptr<NormalizeStream> OpenStream();
  // normd.v1.DiagnosticsService: the request's input returned as output, without compute
  // (benchmarks); UNIMPLEMENTED where the server runs with --no-diagnostics.
  absl::StatusOr<v1::NormalizeResponse> Echo(const v1::NormalizeRequest& request,
                                             const CallOptions& c = {});
  std::unique_ptr<NormalizeStream> OpenEchoStream();
  // Asynchronous raw calls, for callers that keep many calls in flight without a thread
  // each (load generators): returns at once; `done` runs exactly once, on a gRPC thread,
  // with the response or the call's status. It must not block. Destroy the Client only
  // once every `done` has run. The InfoCallback forms also say which replica answered
  // and how many attempts were retried (normd returns gRPC's grpc-previous-rpc-attempts
  // count as the trailer normd-previous-rpc-attempts).
  using Callback = std::function<void(absl::StatusOr<v1::NormalizeResponse>)>;
  using InfoCallback =
      std::function<void(absl::StatusOr<v1::NormalizeResponse>, const CallInfo& info)>;
  CallHandle NormalizeAsync(v1::NormalizeRequest request, Callback done, const CallOptions& c = {});
  CallHandle EchoAsync(v1::NormalizeRequest request, Callback done, const CallOptions& c = {});
  CallHandle NormalizeAsync(v1::NormalizeRequest request, InfoCallback done,
                            const CallOptions& c = {});
  CallHandle EchoAsync(v1::NormalizeRequest request, InfoCallback done, const CallOptions& c = {});
  // An asynchronous NormalizeStream (EchoStream with echo) driven by `reactor`, gRPC's
  // callback-API stream object: binds it to a new call on `context`, which must outlive
  // the call; the caller then starts its reads and writes and calls reactor->StartCall().
  // The context holds a reference to the Client's channel: destroy it in OnDone before
  // signalling anyone who may then destroy the Client (the last reference must not be
  // dropped on a gRPC thread).
  using StreamReactor = grpc::ClientBidiReactor<v1::NormalizeRequest, v1::NormalizeResponse>;
  void BindStreamAsync(grpc::ClientContext* context, StreamReactor* reactor, bool echo);
  // The same unary call on a caller-owned completion queue (gRPC's completion-queue API),
  // for a caller that polls `cq` on its own thread instead of being called back on gRPC's:
  // sets the deadline on `context`, starts the call and asks for its answer, which
  // arrives on `cq` as `tag` with the response in `*response` and the status in
  // `*status`. `context`, `response`, `status` and the returned reader must outlive that
  // event; CallInfoOf(*context) then says who answered. The request goes whole: a caller
  // that wants large requests chunked sends those for which Chunks() is true through
  // NormalizeAsync instead (as normbench's open loop does).
  using QueueReader = grpc::ClientAsyncResponseReader<v1::NormalizeResponse>;
  std::unique_ptr<QueueReader> StartOnQueue(bool echo, grpc::ClientContext* context,
                                            const v1::NormalizeRequest& request,
                                            grpc::CompletionQueue* cq,
                                            v1::NormalizeResponse* response, grpc::Status* status,
                                            void* tag);
  static CallInfo CallInfoOf(const grpc::ClientContext& context);
  // Whether Normalize, NormalizeAsync and CallAsync send `request` as row chunks
  // (ClientOptions::chunking).
  bool Chunks(const v1::NormalizeRequest& request) const;
  absl::StatusOr<v1::GetServerInfoResponse> GetServerInfo();
  // The shared-memory data plane (shared_memory.h; same host only). The client remembers
  // what it registered: when a call names a region the server does not know (a restarted
  // server forgets its regions), that call fails INVALID_ARGUMENT naming
  // `...shared_memory.region`, and the client registers every region it remembers again
  // at once, so the calls after it work.
  absl::Status RegisterSharedMemory(const SharedMemoryRegion& region);
  absl::Status RegisterSharedMemory(const v1::RegisterSharedMemoryRequest& request);
  absl::Status UnregisterSharedMemory(const std::string& name);  // "": every region
  absl::StatusOr<v1::SharedMemoryStatusResponse> SharedMemoryStatus(const std::string& name = "");
  // grpc.health.v1.Health/Check of `service` ("": the whole server): true when SERVING.
  absl::StatusOr<bool> CheckHealth(const std::string& service = "");
  absl::StatusOr<v1::GetDeepNormCoefficientsResponse> GetDeepNormCoefficients(v1::Architecture arch,
                                                                              int encoder_layers,
                                                                              int decoder_layers);

 private:
  // One channel's stubs.
  struct Stubs {
    std::unique_ptr<v1::NormService::Stub> norm;
    std::unique_ptr<v1::DiagnosticsService::Stub> diagnostics;  // Echo, EchoStream
    std::unique_ptr<grpc::health::v1::Health::Stub> health;
    std::unique_ptr<grpc::GenericStub> generic;  // chunked calls' hand-written messages
  };
  Client(std::vector<Stubs> pool, ClientOptions options, std::string authorization)
      : pool_(std::move(pool)),
        options_(std::move(options)),
        authorization_(std::move(authorization)) {}
  Stubs& Next();  // the next channel of the pool, in turn
  // Deadline (the call's own timeout or the client's) and credentials.
  void Prepare(grpc::ClientContext* context, const CallOptions& c = {}) const;
  void Authorize(grpc::ClientContext* context) const;  // the bearer token, if any
  absl::StatusOr<NormResult> Call(const v1::NormalizeRequest& request, const CallOptions& c);
  CallHandle StartAsync(bool echo, v1::NormalizeRequest request, InfoCallback done,
                        const CallOptions& c);
  // The request `source` holds as row chunks on a NormalizeStream (chunked_call.cc).
  // `into`, when not null, receives the answer (a blocking caller's; chunking.h).
  CallHandle StartChunked(std::shared_ptr<const ChunkSource> source, ChunkPlan plan,
                          InfoCallback done, const CallOptions& c,
                          v1::NormalizeResponse* into = nullptr);
  // The same on a completion queue that the calling thread polls until the call ends
  // (chunked_call_on_queue.cc): the blocking Normalize's. The answer goes into `into`.
  absl::Status NormalizeChunkedOnQueue(std::shared_ptr<const ChunkSource> source,
                                       const ChunkPlan& plan, const CallOptions& c,
                                       v1::NormalizeResponse* into);
  std::optional<ChunkPlan> PlanFor(const v1::NormalizeRequest& request) const;
  // A failed call's status: when it names an unregistered region, registers again (without
  // waiting) every region this client registered.
  void NoteFailure(const absl::Status& status);

  std::vector<Stubs> pool_;
  std::atomic<uint64_t> next_{0};
  ClientOptions options_;
  std::string authorization_;  // "Bearer <token>", or empty
  absl::Mutex regions_mu_;
  std::map<std::string, v1::RegisterSharedMemoryRequest> regions_ ABSL_GUARDED_BY(regions_mu_);
  // Re-registrations in flight (NoteFailure); the destructor waits for them, so that no
  // gRPC thread drops the channel's last reference.
  int reregistering_ ABSL_GUARDED_BY(regions_mu_) = 0;
};

// The request field a failed call names (google.rpc.BadRequest in the status's details),
// or "" when it names none.
//   if (!r.ok()) std::cerr << normd::ErrorField(r.status());  // e.g. "rms_norm.eps"
std::string ErrorField(const absl::Status& status);

// A response's tensors as a NormResult (what the typed calls return).
NormResult ToNormResult(const v1::NormalizeResponse& response);
NormResult ToNormResult(v1::NormalizeResponse&& response);  // moves the tensors' bytes

}  // namespace normd

#endif  // NORMD_CLIENT_CLIENT_H_
