// A consumer of the installed normd client package: one RMSNorm call checked against the
// formula, one malformed call whose field is read from the error details.
//   consumer TARGET
#include <cmath>
#include <cstdio>

#include "normd/client.h"
#include "normd/version.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer TARGET\n");
    return 2;
  }
  std::printf("normd client %s\n", NORMD_VERSION_STRING);
  auto client = normd::Client::Create(argv[1], {});
  if (!client.ok()) return 1;
  const normd::HostTensor x =
      normd::HostTensor::FromFloats(normd::DType::kF32, {1, 4}, {3, -1, 4, -2});
  normd::RmsNormOptions options;
  options.eps = 0.0;
  absl::StatusOr<normd::NormResult> r = (*client)->RmsNorm(x, options);
  if (!r.ok()) {
    std::fprintf(stderr, "consumer: %s\n", r.status().ToString().c_str());
    return 1;
  }
  const std::vector<float> y = r->output.ToFloats();
  const double scale = 1 / std::sqrt(7.5);
  const double want[] = {3 * scale, -1 * scale, 4 * scale, -2 * scale};
  for (int i = 0; i < 4; ++i) {
    if (std::fabs(y[i] - want[i]) > 1e-6) {
      std::fprintf(stderr, "consumer: y[%d] = %g, expected %g\n", i, y[i], want[i]);
      return 1;
    }
  }
  options.eps = -1.0;
  r = (*client)->RmsNorm(x, options);
  if (r.ok() || r.status().code() != absl::StatusCode::kInvalidArgument ||
      normd::ErrorField(r.status()) != "rms_norm.eps") {
    std::fprintf(stderr, "consumer: expected INVALID_ARGUMENT naming rms_norm.eps, got %s\n",
                 r.status().ToString().c_str());
    return 1;
  }
  std::printf("consumer: ok\n");
  return 0;
}
