#include "server/deepnorm.h"

#include <cmath>

#include "server/field_error.h"

namespace normd::server {

absl::StatusOr<DeepNormCoefficients> ComputeDeepNorm(Architecture arch, int encoder_layers,
                                                     int decoder_layers) {
  const bool uses_encoder = arch != Architecture::kDecoder;
  const bool uses_decoder = arch != Architecture::kEncoder;
  if (uses_encoder && encoder_layers <= 0) {
    return InvalidField("encoder_layers", "expected > 0, got ", encoder_layers);
  }
  if (uses_decoder && decoder_layers <= 0) {
    return InvalidField("decoder_layers", "expected > 0, got ", decoder_layers);
  }
  const double n = encoder_layers, m = decoder_layers;
  DeepNormCoefficients out;
  switch (arch) {
    case Architecture::kEncoder:
      out.encoder_alpha = std::pow(2 * n, 0.25);
      out.encoder_beta = std::pow(8 * n, -0.25);
      break;
    case Architecture::kDecoder:
      out.decoder_alpha = std::pow(2 * m, 0.25);
      out.decoder_beta = std::pow(8 * m, -0.25);
      break;
    case Architecture::kEncoderDecoder:
      // The paper's exponent is 1/16 (some summaries misprint 1/10).
      out.encoder_alpha = 0.81 * std::pow(std::pow(n, 4) * m, 1.0 / 16);
      out.encoder_beta = 0.87 * std::pow(std::pow(n, 4) * m, -1.0 / 16);
      out.decoder_alpha = std::pow(3 * m, 0.25);
      out.decoder_beta = std::pow(12 * m, -0.25);
      break;
  }
  return out;
}

}  // namespace normd::server
