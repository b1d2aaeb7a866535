#include "server/norm_service.h"

#include "absl/strings/str_cat.h"
#include "server/deepnorm.h"
#include "server/field_error.h"
#include "server/wire_enums.h"

#ifndef NORMD_VERSION
#define NORMD_VERSION "0.0.0"
#endif

namespace normd::server {

void FillServerInfo(const CallEnv& env, v1::GetServerInfoResponse* info) {
  info->set_version(NORMD_VERSION);
  for (const char* op : {"layer_norm", "rms_norm", "l2_norm", "batch_norm", "group_norm",
                         "instance_norm", "qk_norm"}) {
    info->add_ops(op);
  }
  for (v1::DataType t : {v1::DATA_TYPE_F32, v1::DATA_TYPE_F16, v1::DATA_TYPE_BF16}) {
    info->add_dtypes(t);
  }
  bool has_cuda = false;
  for (const auto& b : env.scheduler->backends()) {
    v1::BackendInfo* bi = info->add_backends();
    const bool cuda = b->kind() == kernels::BackendKind::kCuda;
    has_cuda = has_cuda || cuda;
    bi->set_backend(cuda ? v1::BACKEND_CUDA : v1::BACKEND_CPU);
    bi->set_available(b->healthy());
    bi->set_device(b->device());
    bi->set_threads(b->threads());
  }
  if (!has_cuda) {
    v1::BackendInfo* bi = info->add_backends();
    bi->set_backend(v1::BACKEND_CUDA);
    bi->set_available(false);
    bi->set_device(absl::StrCat("none: ", env.options.cuda_absent_reason));
  }
  info->set_max_message_bytes(env.options.max_message_bytes);
  info->set_max_rank(env.options.limits.max_rank);
  info->set_shared_memory(env.shared_memory != nullptr);
  info->set_max_elements(env.options.limits.max_elements);
}

absl::Status ComputeDeepNorm(const v1::GetDeepNormCoefficientsRequest& request,
                             v1::GetDeepNormCoefficientsResponse* response) {
  Architecture arch;
  switch (request.architecture()) {
    case v1::ARCHITECTURE_ENCODER:
      arch = Architecture::kEncoder;
      break;
    case v1::ARCHITECTURE_DECODER:
      arch = Architecture::kDecoder;
      break;
    case v1::ARCHITECTURE_ENCODER_DECODER:
      arch = Architecture::kEncoderDecoder;
      break;
    default:
      return InvalidField("architecture",
                          "expected ARCHITECTURE_ENCODER, ARCHITECTURE_DECODER or "
                          "ARCHITECTURE_ENCODER_DECODER, got ",
                          static_cast<int>(request.architecture()));
  }
  absl::StatusOr<DeepNormCoefficients> c =
      server::ComputeDeepNorm(arch, request.encoder_layers(), request.decoder_layers());
  if (!c.ok()) return c.status();
  if (c->encoder_alpha) response->set_encoder_alpha(*c->encoder_alpha);
  if (c->encoder_beta) response->set_encoder_beta(*c->encoder_beta);
  if (c->decoder_alpha) response->set_decoder_alpha(*c->decoder_alpha);
  if (c->decoder_beta) response->set_decoder_beta(*c->decoder_beta);
  return absl::OkStatus();
}

}  // namespace normd::server
