#include "normd/client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace normd {
namespace {

v1::DType WireDType(DType t) {
  switch (t) {
    case DType::kF32:
      return v1::F32;
    case DType::kF16:
      return v1::F16;
    case DType::kBF16:
      return v1::BF16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return {static_cast<absl::StatusCode>(s.error_code()), s.error_message()};
}

v1::EpsPlacement WireEps(EpsPlacement p) {
  return p == EpsPlacement::kInsideSqrt ? v1::EPS_INSIDE_SQRT : v1::EPS_ADD_TO_STD;
}
v1::Layout WireLayout(Layout l) {
  return l == Layout::kChannelsFirst ? v1::CHANNELS_FIRST : v1::CHANNELS_LAST;
}

void SetCommon(const CommonOptions& o, v1::NormalizeRequest* r) {
  r->set_backend(o.backend == Backend::kCpu    ? v1::BACKEND_CPU
                 : o.backend == Backend::kCuda ? v1::BACKEND_CUDA
                                               : v1::BACKEND_AUTO);
  if (o.output_dtype) r->set_output_dtype(WireDType(*o.output_dtype));
}

void SetResidual(const std::optional<ResidualOptions>& r, v1::Residual* out) {
  ToWire(r->skip, out->mutable_skip());
  out->set_alpha(r->alpha);
  out->set_placement(r->placement == ResidualOptions::Placement::kAddThenNorm ? v1::ADD_THEN_NORM
                                                                              : v1::NORM_THEN_ADD);
  out->set_return_sum(r->return_sum);
}

class GrpcNormalizeStream final : public NormalizeStream {
 public:
  GrpcNormalizeStream(v1::NormService::Stub* stub, bool echo) {
    stream_ = echo ? stub->EchoStream(&context_) : stub->NormalizeStream(&context_);
  }
  bool Write(const v1::NormalizeRequest& request) override { return stream_->Write(request); }
  bool Read(v1::NormalizeResponse* response) override { return stream_->Read(response); }
  absl::Status Finish() override {
    stream_->WritesDone();
    v1::NormalizeResponse drain;
    while (stream_->Read(&drain)) {
    }
    return FromGrpc(stream_->Finish());
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::NormalizeRequest, v1::NormalizeResponse>> stream_;
};

}  // namespace

void ToWire(const HostTensor& t, v1::Tensor* out) {
  out->set_dtype(WireDType(t.dtype));
  out->mutable_shape()->Assign(t.shape.begin(), t.shape.end());
  out->set_data(t.bytes);
}

HostTensor FromWire(const v1::Tensor& t) {
  HostTensor out;
  out.dtype = t.dtype() == v1::F16    ? DType::kF16
              : t.dtype() == v1::BF16 ? DType::kBF16
                                      : DType::kF32;
  out.shape.assign(t.shape().begin(), t.shape().end());
  out.bytes = t.data();
  return out;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const std::string& target,
                                                       const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("target: expected a gRPC target, got ''");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  // Several resolved addresses (ipv4:a,b or DNS with many records): spread the calls.
  args.SetLoadBalancingPolicyName("round_robin");
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  if (channel == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("target: cannot use '", target, "'"));
  return std::unique_ptr<Client>(new Client(v1::NormService::NewStub(channel), options));
}

void Client::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMicroseconds(options_.timeout));
}

absl::StatusOr<v1::NormalizeResponse> Client::Normalize(const v1::NormalizeRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::NormalizeResponse response;
  if (absl::Status s = FromGrpc(stub_->Normalize(&context, request, &response)); !s.ok()) return s;
  return response;
}

void Client::NormalizeAsync(v1::NormalizeRequest request, Callback done) {
  CallAsync(false, std::move(request), std::move(done));
}

void Client::EchoAsync(v1::NormalizeRequest request, Callback done) {
  CallAsync(true, std::move(request), std::move(done));
}

void Client::BindStreamAsync(grpc::ClientContext* context, StreamReactor* reactor, bool echo) {
  if (echo) {
    stub_->async()->EchoStream(context, reactor);
  } else {
    stub_->async()->NormalizeStream(context, reactor);
  }
}

std::unique_ptr<Client::QueueReader> Client::StartOnQueue(bool echo, grpc::ClientContext* context,
                                                          const v1::NormalizeRequest& request,
                                                          grpc::CompletionQueue* cq,
                                                          v1::NormalizeResponse* response,
                                                          grpc::Status* status, void* tag) {
  Prepare(context);
  std::unique_ptr<QueueReader> reader =
      echo ? stub_->AsyncEcho(context, request, cq) : stub_->AsyncNormalize(context, request, cq);
  reader->Finish(response, status, tag);
  return reader;
}

void Client::CallAsync(bool echo, v1::NormalizeRequest request, Callback done) {
  // What the call reads and writes must outlive it: owned here, freed by the callback.
  struct Call {
    grpc::ClientContext context;
    v1::NormalizeRequest request;
    v1::NormalizeResponse response;
    Callback done;
  };
  auto* call = new Call;
  Prepare(&call->context);
  call->request = std::move(request);
  call->done = std::move(done);
  auto on_done = [call](grpc::Status s) {
    // The call's context holds a reference to the channel; it is freed before `done`
    // runs. Otherwise a caller that destroys the Client as soon as every `done` has run
    // could leave the channel's last reference to this gRPC thread, and gRPC 1.51 then
    // tears down its callback threads' queue from under this very thread (an ASan
    // double free in the tests).
    Callback done = std::move(call->done);
    absl::StatusOr<v1::NormalizeResponse> result =
        s.ok() ? absl::StatusOr<v1::NormalizeResponse>(std::move(call->response)) : FromGrpc(s);
    delete call;
    done(std::move(result));
  };
  if (echo) {
    stub_->async()->Echo(&call->context, &call->request, &call->response, std::move(on_done));
  } else {
    stub_->async()->Normalize(&call->context, &call->request, &call->response, std::move(on_done));
  }
}

absl::StatusOr<v1::NormalizeResponse> Client::Echo(const v1::NormalizeRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::NormalizeResponse response;
  if (absl::Status s = FromGrpc(stub_->Echo(&context, request, &response)); !s.ok()) return s;
  return response;
}

std::unique_ptr<NormalizeStream> Client::OpenStream() {
  return std::make_unique<GrpcNormalizeStream>(stub_.get(), /*echo=*/false);
}

std::unique_ptr<NormalizeStream> Client::OpenEchoStream() {
  return std::make_unique<GrpcNormalizeStream>(stub_.get(), /*echo=*/true);
}

absl::StatusOr<v1::ServerInfo> Client::GetServerInfo() {
  grpc::ClientContext context;
  Prepare(&context);
  v1::ServerInfo info;
  if (absl::Status s = FromGrpc(stub_->GetServerInfo(&context, {}, &info)); !s.ok()) return s;
  return info;
}

absl::StatusOr<v1::DeepNormCoefficients> Client::GetDeepNormCoefficients(v1::Architecture arch,
                                                                         int encoder_layers,
                                                                         int decoder_layers) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::DeepNormRequest request;
  request.set_architecture(arch);
  request.set_encoder_layers(encoder_layers);
  request.set_decoder_layers(decoder_layers);
  v1::DeepNormCoefficients out;
  if (absl::Status s = FromGrpc(stub_->GetDeepNormCoefficients(&context, request, &out)); !s.ok())
    return s;
  return out;
}

absl::StatusOr<NormResult> Client::Call(const v1::NormalizeRequest& request) {
  absl::StatusOr<v1::NormalizeResponse> r = Normalize(request);
  if (!r.ok()) return r.status();
  NormResult out;
  out.output = FromWire(r->output());
  auto take = [](bool has, const v1::Tensor& t, std::optional<HostTensor>* dst) {
    if (has) *dst = FromWire(t);
  };
  take(r->has_k_output(), r->k_output(), &out.k_output);
  take(r->has_residual_sum(), r->residual_sum(), &out.residual_sum);
  take(r->has_batch_mean(), r->batch_mean(), &out.batch_mean);
  take(r->has_batch_var(), r->batch_var(), &out.batch_var);
  take(r->has_running_mean(), r->running_mean(), &out.running_mean);
  take(r->has_running_var(), r->running_var(), &out.running_var);
  out.backend = r->backend() == v1::BACKEND_CUDA ? Backend::kCuda : Backend::kCpu;
  out.queue_us = r->timing().queue_us();
  out.batch_requests = r->timing().batch_requests();
  out.compute_us = r->timing().compute_us();
  out.total_us = r->timing().total_us();
  return out;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const LayerNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::LayerNormParams* p = r.mutable_layer_norm();
  p->set_normalized_ndim(o.normalized_ndim);
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.eps) p->set_eps(*o.eps);
  p->set_eps_placement(WireEps(o.eps_placement));
  if (o.residual) SetResidual(o.residual, p->mutable_residual());
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const RmsNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::RmsNormParams* p = r.mutable_rms_norm();
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.eps) p->set_eps(*o.eps);
  p->set_weight_offset(o.weight_offset);
  if (o.partial_fraction) p->set_partial_fraction(*o.partial_fraction);
  p->set_eps_placement(WireEps(o.eps_placement));
  p->set_cast_before_weight(o.cast_before_weight);
  if (o.residual) SetResidual(o.residual, p->mutable_residual());
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const L2NormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::L2NormParams* p = r.mutable_l2_norm();
  if (o.eps) p->set_eps(*o.eps);
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const BatchNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::BatchNormParams* p = r.mutable_batch_norm();
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.running_mean) ToWire(*o.running_mean, p->mutable_running_mean());
  if (o.running_var) ToWire(*o.running_var, p->mutable_running_var());
  p->set_training(o.training);
  if (o.momentum) p->set_momentum(*o.momentum);
  if (o.eps) p->set_eps(*o.eps);
  p->set_layout(WireLayout(o.layout));
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const GroupNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::GroupNormParams* p = r.mutable_group_norm();
  p->set_num_groups(o.num_groups);
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.eps) p->set_eps(*o.eps);
  p->set_layout(WireLayout(o.layout));
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const InstanceNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::InstanceNormParams* p = r.mutable_instance_norm();
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.running_mean) ToWire(*o.running_mean, p->mutable_running_mean());
  if (o.running_var) ToWire(*o.running_var, p->mutable_running_var());
  if (o.eps) p->set_eps(*o.eps);
  p->set_no_input_stats(!o.use_input_stats);
  p->set_layout(WireLayout(o.layout));
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& q, const HostTensor& k, const QkNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  v1::QkNormParams* p = r.mutable_qk_norm();
  ToWire(q, p->mutable_q());
  ToWire(k, p->mutable_k());
  p->set_kind(o.kind == QkNormOptions::Kind::kRms     ? v1::QK_RMS
              : o.kind == QkNormOptions::Kind::kLayer ? v1::QK_LAYER
                                                      : v1::QK_L2);
  if (o.q_weight) ToWire(*o.q_weight, p->mutable_q_weight());
  if (o.k_weight) ToWire(*o.k_weight, p->mutable_k_weight());
  if (o.eps) p->set_eps(*o.eps);
  return r;
}

absl::StatusOr<NormResult> Client::LayerNorm(const HostTensor& x, const LayerNormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(x, o);
  return Call(r);
}

absl::StatusOr<NormResult> Client::RmsNorm(const HostTensor& x, const RmsNormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(x, o);
  return Call(r);
}

absl::StatusOr<NormResult> Client::L2Norm(const HostTensor& x, const L2NormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(x, o);
  return Call(r);
}

absl::StatusOr<NormResult> Client::BatchNorm(const HostTensor& x, const BatchNormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(x, o);
  return Call(r);
}

absl::StatusOr<NormResult> Client::GroupNorm(const HostTensor& x, const GroupNormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(x, o);
  return Call(r);
}

absl::StatusOr<NormResult> Client::InstanceNorm(const HostTensor& x, const InstanceNormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(x, o);
  return Call(r);
}

absl::StatusOr<NormResult> Client::QkNorm(const HostTensor& q, const HostTensor& k,
                                          const QkNormOptions& o) {
  v1::NormalizeRequest r = MakeRequest(q, k, o);
  return Call(r);
}

}  // namespace normd
