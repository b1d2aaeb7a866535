// normd-example: the client library in one program, as the README shows it. Connects to
// a normd (argument 1, default localhost:50051; several replicas as
// "ipv4:127.0.0.1:5001,127.0.0.1:5002"), then:
//   1. a blocking RMSNorm of a bf16 tensor made from a std::vector,
//   2. LayerNorms in flight at once, with futures and a per-call deadline,
//   3. a GroupNorm with a callback,
//   4. a call cancelled before its answer came,
// and prints what came back. Exit 0 when every step did what it should.
#include <cstdio>
#include <vector>

#include "absl/synchronization/notification.h"
#include "normd/client.h"

int main(int argc, char** argv) {
  const std::string target = argc > 1 ? argv[1] : "localhost:50051";
  normd::ClientOptions options;  // retries on UNAVAILABLE, round_robin, keepalive: defaults
  options.channels = 2;          // a small channel pool
  auto client = normd::Client::Create(target, options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }

  // 1. Blocking: y = x / rms(x) * (1 + w), Gemma's (1+w), in bf16.
  std::vector<float> values = {3, -1, 4, -2, 1, 5, -9, 2};
  normd::HostTensor x = normd::HostTensor::FromFloats(normd::DType::kBF16, {2, 4}, values);
  normd::RmsNormOptions rms;
  rms.weight = normd::HostTensor::FromVector(normd::DType::kF32, std::vector<float>{0, 0, 1, 1});
  rms.weight_offset = 1.0;
  absl::StatusOr<normd::NormResult> y = (*client)->RmsNorm(x, rms);
  if (!y.ok()) {
    std::fprintf(stderr, "rms-norm: %s (field: %s)\n", y.status().ToString().c_str(),
                 normd::ErrorField(y.status()).c_str());
    return 1;
  }
  std::vector<float> out(y->output.numel());
  y->output.CopyTo(out);  // into the caller's memory
  std::printf("rms-norm:      ");
  for (float v : out) std::printf(" %.4g", v);
  std::printf("\n");

  // 2. Futures: four LayerNorms in flight at once, each with a 5 s deadline.
  normd::LayerNormOptions ln;
  ln.eps = 1e-5;
  std::vector<normd::PendingResult> pending;
  for (int i = 0; i < 4; ++i) {
    std::vector<float> row = {float(i), float(i + 1), float(i + 3), float(i + 6)};
    pending.push_back(
        (*client)->LayerNormAsync(normd::HostTensor::FromFloats(normd::DType::kF32, {1, 4}, row),
                                  ln, {.timeout = absl::Seconds(5)}));
  }
  for (auto& p : pending) {
    absl::StatusOr<normd::NormResult> r = p.Get();
    if (!r.ok()) {
      std::fprintf(stderr, "layer-norm: %s\n", r.status().ToString().c_str());
      return 1;
    }
    std::printf("layer-norm:    ");
    for (float v : r->output.ToFloats()) std::printf(" %.4f", v);
    std::printf("\n");
  }

  // 3. A callback, on a gRPC thread: GroupNorm of [N=1, C=4, 2] in 2 groups.
  absl::Notification answered;
  absl::Status group_status;
  normd::GroupNormOptions gn;
  gn.num_groups = 2;
  (*client)->GroupNormAsync(normd::HostTensor::FromFloats(normd::DType::kF32, {1, 4, 2}, values),
                            gn, [&](absl::StatusOr<normd::NormResult> r) {
                              group_status = r.status();
                              if (r.ok())
                                std::printf("group-norm:     %zu values\n",
                                            r->output.ToFloats().size());
                              answered.Notify();
                            });
  answered.WaitForNotification();
  if (!group_status.ok()) {
    std::fprintf(stderr, "group-norm: %s\n", group_status.ToString().c_str());
    return 1;
  }

  // 4. Cancellation: a large request, cancelled at once, ends CANCELLED (or OK, had it
  // been answered first).
  normd::HostTensor big(normd::DType::kF32, {256, 4096});
  normd::PendingResult cancelled = (*client)->RmsNormAsync(big, normd::RmsNormOptions{});
  cancelled.Cancel();
  absl::StatusOr<normd::NormResult> c = cancelled.Get();
  std::printf("cancelled:      %s\n", c.ok() ? "answered first" : c.status().ToString().c_str());
  if (!c.ok() && c.status().code() != absl::StatusCode::kCancelled) return 1;
  return 0;
}
