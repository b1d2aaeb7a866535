// DeepNorm (DeepNet, Wang et al. 2022) residual scale alpha and init scale beta: a small
// formula module of the transport room (GetDeepNormCoefficients), not a kernel.
// Pure functions; safe from any thread.
#ifndef NORMD_SERVER_DEEPNORM_H_
#define NORMD_SERVER_DEEPNORM_H_

#include <optional>

#include "absl/status/statusor.h"

namespace normd::server {

enum class Architecture { kEncoder, kDecoder, kEncoderDecoder };

struct DeepNormCoefficients {
  std::optional<double> encoder_alpha, encoder_beta;
  std::optional<double> decoder_alpha, decoder_beta;
};

// REQUIRES nothing; returns INVALID_ARGUMENT when a layer count the architecture uses is
// not positive.
absl::StatusOr<DeepNormCoefficients> ComputeDeepNorm(Architecture arch, int encoder_layers,
                                                     int decoder_layers);

}  // namespace normd::server

#endif  // NORMD_SERVER_DEEPNORM_H_
