// DeepNorm (DeepNet, Wang et al. 2022) residual scale alpha and init scale beta.
// Pure functions; safe from any thread.
#ifndef NORMD_KERNELS_DEEPNORM_H_
#define NORMD_KERNELS_DEEPNORM_H_

#include <optional>

#include "absl/status/statusor.h"

namespace normd::kernels {

enum class Architecture { kEncoder, kDecoder, kEncoderDecoder };

struct DeepNormCoefficients {
  std::optional<double> encoder_alpha, encoder_beta;
  std::optional<double> decoder_alpha, decoder_beta;
};

// REQUIRES nothing; returns INVALID_ARGUMENT when a layer count the architecture uses is
// not positive.
absl::StatusOr<DeepNormCoefficients> ComputeDeepNorm(Architecture arch, int encoder_layers,
                                                     int decoder_layers);

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_DEEPNORM_H_
