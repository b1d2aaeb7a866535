#include "server/norm_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "normd/kernels/deepnorm.h"
#include "server/request_builder.h"
#include "server/status_map.h"
#include "spdlog/spdlog.h"

#ifndef NORMD_VERSION
#define NORMD_VERSION "0.0.0"
#endif

namespace normd::server {

absl::Status NormServiceImpl::Handle(const v1::NormalizeRequest& request,
                                     v1::NormalizeResponse* response) {
  const absl::Time start = absl::Now();
  response->set_id(request.id());
  absl::StatusOr<Job> job = BuildJob(request, options_.limits, response);
  absl::StatusOr<RunResult> run = job.ok() ? scheduler_->Run(*job) : job.status();
  if (!run.ok()) {
    // Partially allocated outputs must not travel with an error.
    response->Clear();
    response->set_id(request.id());
    if (run.status().code() == absl::StatusCode::kInternal) {
      spdlog::error("request {}: {}", request.id(), run.status().ToString());
    } else {
      spdlog::debug("request {} rejected: {}", request.id(), run.status().ToString());
    }
    return run.status();
  }
  response->set_backend(run->backend == kernels::BackendKind::kCuda ? v1::BACKEND_CUDA
                                                                    : v1::BACKEND_CPU);
  v1::Timing* timing = response->mutable_timing();
  timing->set_queue_us(0);  // runs inline: no queue yet
  timing->set_compute_us(run->compute_us);
  timing->set_total_us(absl::ToInt64Microseconds(absl::Now() - start));
  return absl::OkStatus();
}

grpc::Status NormServiceImpl::Normalize(grpc::ServerContext*, const v1::NormalizeRequest* request,
                                        v1::NormalizeResponse* response) {
  return ToGrpcStatus(Handle(*request, response));
}

grpc::Status NormServiceImpl::NormalizeStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::NormalizeResponse, v1::NormalizeRequest>* stream) {
  v1::NormalizeRequest request;
  while (stream->Read(&request)) {
    v1::NormalizeResponse response;
    if (absl::Status s = Handle(request, &response); !s.ok()) {
      // One bad request answers for its own id; the stream goes on.
      response.mutable_error()->set_code(static_cast<int>(s.code()));
      response.mutable_error()->set_message(std::string(s.message()));
    }
    if (!stream->Write(response)) break;
    if (context->IsCancelled()) break;
  }
  return grpc::Status::OK;
}

grpc::Status NormServiceImpl::GetServerInfo(grpc::ServerContext*, const v1::ServerInfoRequest*,
                                            v1::ServerInfo* info) {
  info->set_version(NORMD_VERSION);
  for (const char* op : {"layer_norm", "rms_norm", "l2_norm", "batch_norm", "group_norm",
                         "instance_norm", "qk_norm"}) {
    info->add_ops(op);
  }
  for (v1::DType t : {v1::F32, v1::F16, v1::BF16}) info->add_dtypes(t);
  bool has_cuda = false;
  for (const auto& b : scheduler_->backends()) {
    v1::BackendInfo* bi = info->add_backends();
    const bool cuda = b->kind() == kernels::BackendKind::kCuda;
    has_cuda = has_cuda || cuda;
    bi->set_backend(cuda ? v1::BACKEND_CUDA : v1::BACKEND_CPU);
    bi->set_available(true);
    bi->set_device(b->device());
    bi->set_threads(b->threads());
  }
  if (!has_cuda) {
    v1::BackendInfo* bi = info->add_backends();
    bi->set_backend(v1::BACKEND_CUDA);
    bi->set_available(false);
    bi->set_device("none: this build has no CUDA backend");
  }
  info->set_max_message_bytes(options_.max_message_bytes);
  info->set_max_rank(options_.limits.max_rank);
  info->set_max_elements(options_.limits.max_elements);
  return grpc::Status::OK;
}

grpc::Status NormServiceImpl::GetDeepNormCoefficients(grpc::ServerContext*,
                                                      const v1::DeepNormRequest* request,
                                                      v1::DeepNormCoefficients* response) {
  kernels::Architecture arch;
  switch (request->architecture()) {
    case v1::ENCODER:
      arch = kernels::Architecture::kEncoder;
      break;
    case v1::DECODER:
      arch = kernels::Architecture::kDecoder;
      break;
    case v1::ENCODER_DECODER:
      arch = kernels::Architecture::kEncoderDecoder;
      break;
    default:
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("architecture: expected ENCODER, DECODER or ENCODER_DECODER, got ",
                       static_cast<int>(request->architecture()))));
  }
  absl::StatusOr<kernels::DeepNormCoefficients> c =
      kernels::ComputeDeepNorm(arch, request->encoder_layers(), request->decoder_layers());
  if (!c.ok()) return ToGrpcStatus(c.status());
  if (c->encoder_alpha) response->set_encoder_alpha(*c->encoder_alpha);
  if (c->encoder_beta) response->set_encoder_beta(*c->encoder_beta);
  if (c->decoder_alpha) response->set_decoder_alpha(*c->decoder_alpha);
  if (c->decoder_beta) response->set_decoder_beta(*c->decoder_beta);
  return grpc::Status::OK;
}

}  // namespace normd::server
