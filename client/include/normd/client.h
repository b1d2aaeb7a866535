// normd's C++ client: one typed method per op over HostTensor, plus the raw
// request/response call and a bidirectional stream.
//
//   auto client = normd::Client::Create("dns:///normd:50051", {});
//   normd::RmsNormOptions opt;
//   opt.weight = w;
//   absl::StatusOr<normd::NormResult> r = (*client)->RmsNorm(x, opt);
//   if (r.ok()) use(r->output);
//
// Errors are absl::Status with the server's gRPC code and message. Any gRPC target string
// works ("host:port", "dns:///name:port", "ipv4:127.0.0.1:5001,127.0.0.1:5002"; several
// addresses are balanced round-robin).
// Thread safety: a Client is safe for concurrent use from multiple threads; a
// NormalizeStream is not (one writer and one reader at a time, as gRPC's).
#ifndef NORMD_CLIENT_CLIENT_H_
#define NORMD_CLIENT_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "normd/host_tensor.h"
#include "normd/v1/normd.grpc.pb.h"

namespace normd {

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(30);  // deadline of each call
  int max_message_bytes = 256 << 20;
  // gRPC shares one connection among channels to the same target with the same options;
  // true gives this client a connection of its own (load generators open several, as
  // many independent callers would).
  bool own_connection = false;
};

enum class Backend { kAuto, kCpu, kCuda };
enum class EpsPlacement { kInsideSqrt, kAddToStd };
enum class Layout { kChannelsFirst, kChannelsLast };

// Options every op takes.
struct CommonOptions {
  Backend backend = Backend::kAuto;
  std::optional<DType> output_dtype;  // default: the input's dtype
};

struct ResidualOptions {
  enum class Placement { kAddThenNorm, kNormThenAdd };
  HostTensor skip;
  double alpha = 1.0;
  Placement placement = Placement::kAddThenNorm;
  bool return_sum = false;
};

struct LayerNormOptions : CommonOptions {
  int normalized_ndim = 1;
  std::optional<HostTensor> weight, bias;
  std::optional<double> eps;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  std::optional<ResidualOptions> residual;
};

struct RmsNormOptions : CommonOptions {
  std::optional<HostTensor> weight;
  std::optional<double> eps;
  double weight_offset = 0.0;
  std::optional<double> partial_fraction;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  bool cast_before_weight = false;
  std::optional<ResidualOptions> residual;
};

struct L2NormOptions : CommonOptions {
  std::optional<double> eps;
};

struct BatchNormOptions : CommonOptions {
  std::optional<HostTensor> weight, bias, running_mean, running_var;
  bool training = false;
  std::optional<double> momentum, eps;
  Layout layout = Layout::kChannelsFirst;
};

struct GroupNormOptions : CommonOptions {
  int num_groups = 1;
  std::optional<HostTensor> weight, bias;
  std::optional<double> eps;
  Layout layout = Layout::kChannelsFirst;
};

struct InstanceNormOptions : CommonOptions {
  std::optional<HostTensor> weight, bias, running_mean, running_var;
  std::optional<double> eps;
  bool use_input_stats = true;
  Layout layout = Layout::kChannelsFirst;
};

struct QkNormOptions : CommonOptions {
  enum class Kind { kRms, kLayer, kL2 };
  Kind kind = Kind::kRms;
  std::optional<HostTensor> q_weight, k_weight;
  std::optional<double> eps;
};

// What an op returned; the optional parts are set when the op produces them.
struct NormResult {
  HostTensor output;                   // y (QK-norm: q normalized)
  std::optional<HostTensor> k_output;  // QK-norm
  std::optional<HostTensor> residual_sum;
  std::optional<HostTensor> batch_mean, batch_var, running_mean, running_var;
  Backend backend = Backend::kCpu;
  int64_t queue_us = 0, compute_us = 0, total_us = 0;
  int batch_requests = 1;  // requests that shared the server's backend run
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

  absl::StatusOr<NormResult> LayerNorm(const HostTensor& x, const LayerNormOptions& o);
  absl::StatusOr<NormResult> RmsNorm(const HostTensor& x, const RmsNormOptions& o);
  absl::StatusOr<NormResult> L2Norm(const HostTensor& x, const L2NormOptions& o);
  absl::StatusOr<NormResult> BatchNorm(const HostTensor& x, const BatchNormOptions& o);
  absl::StatusOr<NormResult> GroupNorm(const HostTensor& x, const GroupNormOptions& o);
  absl::StatusOr<NormResult> InstanceNorm(const HostTensor& x, const InstanceNormOptions& o);
  absl::StatusOr<NormResult> QkNorm(const HostTensor& q, const HostTensor& k,
                                    const QkNormOptions& o);

  // The raw call: any request, the response as the server sent it.
  absl::StatusOr<v1::NormalizeResponse> Normalize(const v1::NormalizeRequest& request);
  // Responses come in request order; several requests may be written before reading.
  std::unique_ptr<NormalizeStream> OpenStream();
  // Diagnostics: the request's input returned as output, without compute (benchmarks).
  absl::StatusOr<v1::NormalizeResponse> Echo(const v1::NormalizeRequest& request);
  std::unique_ptr<NormalizeStream> OpenEchoStream();
  // Asynchronous raw calls, for callers that keep many calls in flight without a thread
  // each (load generators): returns at once; `done` runs exactly once, on a gRPC thread,
  // with the response or the call's status. It must not block. Destroy the Client only
  // once every `done` has run.
  using Callback = std::function<void(absl::StatusOr<v1::NormalizeResponse>)>;
  void NormalizeAsync(v1::NormalizeRequest request, Callback done);
  void EchoAsync(v1::NormalizeRequest request, Callback done);
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
  // event.
  using QueueReader = grpc::ClientAsyncResponseReader<v1::NormalizeResponse>;
  std::unique_ptr<QueueReader> StartOnQueue(bool echo, grpc::ClientContext* context,
                                            const v1::NormalizeRequest& request,
                                            grpc::CompletionQueue* cq,
                                            v1::NormalizeResponse* response, grpc::Status* status,
                                            void* tag);
  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  absl::StatusOr<v1::DeepNormCoefficients> GetDeepNormCoefficients(v1::Architecture arch,
                                                                   int encoder_layers,
                                                                   int decoder_layers);

 private:
  Client(std::unique_ptr<v1::NormService::Stub> stub, ClientOptions options)
      : stub_(std::move(stub)), options_(options) {}
  void Prepare(grpc::ClientContext* context) const;
  absl::StatusOr<NormResult> Call(const v1::NormalizeRequest& request);
  void CallAsync(bool echo, v1::NormalizeRequest request, Callback done);

  std::unique_ptr<v1::NormService::Stub> stub_;
  ClientOptions options_;
};

// The request each typed method sends, for callers that batch them on a NormalizeStream
// or inspect them.
v1::NormalizeRequest MakeRequest(const HostTensor& x, const LayerNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const RmsNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const L2NormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const BatchNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const GroupNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const InstanceNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& q, const HostTensor& k, const QkNormOptions& o);

// Conversions between HostTensor and the wire tensor.
void ToWire(const HostTensor& t, v1::Tensor* out);
HostTensor FromWire(const v1::Tensor& t);

}  // namespace normd

#endif  // NORMD_CLIENT_CLIENT_H_
