// normd-plain-bench: how near a kernel with the same passes over memory normd's
// memory-bound paths run. For each case it times, on one thread, normd's CPU backend and a
// plain kernel (plain_kernels.h: a statistics pass over the same unit of work, then an
// output pass over it with non-temporal stores, in the simplest loops), each in alternating
// batches with memcpy of the same bytes, and prints GB/s, the ratios to memcpy, and
// normd's speed as a fraction of the plain kernel's. Where normd is near the plain kernel
// and both are below memcpy, the passes, not normd's code, set the pace on that machine.
// The plain kernel's outputs are checked against normd's first (the largest difference,
// relative to the largest output, within Tolerance: 2e-4 in f32, four ulps of 1 in
// f16/bf16), so that both compute the same thing. Bytes counted: x read once and y
// written once, as normd-kernel-bench counts these cases.
//
//   normd-plain-bench [--filter REGEX] [--min-time SECONDS]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/bench/bench_check.h"
#include "kernels/bench/bench_inputs.h"
#include "kernels/bench/bench_timing.h"
#include "kernels/bench/plain_kernels.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels::bench {
namespace {

using Bytes = PageBytes;  // on a page, as normd-kernel-bench's (bench_inputs.h)

// n elements of dtype t, normd-kernel-bench's inputs (FillNormal).
Bytes Filled(DType t, int64_t n, uint32_t seed) {
  Bytes b = AllocatePageAligned(static_cast<size_t>(n * ElementSize(t)));
  FillNormal(t, b.get(), n, seed);
  return b;
}
Bytes Zeroed(DType t, int64_t n) {
  Bytes b = AllocatePageAligned(static_cast<size_t>(n * ElementSize(t)));
  std::memset(b.get(), 0, static_cast<size_t>(n * ElementSize(t)));
  return b;
}

// A case's buffers live in its functions' captures: made when the case runs, freed after.
struct Case {
  DType dtype = DType::kF32;
  int64_t elements = 0;  // of x (and of y), over all of the case's tensors
  std::function<void()> normd, plain;
  std::function<double()> difference;  // max |plain - normd| / max |normd|, after both ran
};

// Tensors shared by a case's functions.
using Shared = std::shared_ptr<Bytes>;
Shared Make(Bytes b) { return std::make_shared<Bytes>(std::move(b)); }

// The channel ops' shape: [32, 64, 56, 56], or channels last [32, 56, 56, 64].
constexpr int64_t kN = 32, kC = 64, kS = 56 * 56, kTotal = kN * kC * kS;

// InstanceNorm (GroupNorm with a group a channel), channels first or last.
Case InstanceNormCase(CpuBackend& cpu, DType t, bool first) {
  const Shared x = Make(Filled(t, kTotal, 1)), y = Make(Zeroed(t, kTotal)),
               yp = Make(Zeroed(t, kTotal));
  GroupNormArgs g;
  g.n = kN;
  g.c = kC;
  g.s = kS;
  g.groups = kC;
  g.layout = first ? Layout::kChannelsFirst : Layout::kChannelsLast;
  g.x = {t, x->get(), kTotal};
  g.y = {t, y->get(), kTotal};
  Case c;
  c.dtype = t;
  c.elements = kTotal;
  c.normd = [&cpu, g, x] { (void)cpu.GroupNorm(g, 1); };
  c.plain = [=] {
    if (first) {
      PlainRuns(t, x->get(), kN * kC, kS, g.eps, yp->get());
    } else {
      PlainSamples(t, x->get(), kN, kS, kC, g.eps, yp->get());
    }
  };
  c.difference = [=] { return Difference(t, yp->get(), y->get(), kTotal); };
  return c;
}

// BatchNorm training, channels first, no affine and no running statistics.
Case BatchNormCase(CpuBackend& cpu, DType t) {
  const Shared x = Make(Filled(t, kTotal, 1)), y = Make(Zeroed(t, kTotal)),
               yp = Make(Zeroed(t, kTotal));
  BatchNormArgs b;
  b.n = kN;
  b.c = kC;
  b.s = kS;
  b.training = true;
  b.layout = Layout::kChannelsFirst;
  b.x = {t, x->get(), kTotal};
  b.y = {t, y->get(), kTotal};
  Case c;
  c.dtype = t;
  c.elements = kTotal;
  c.normd = [&cpu, b, x] { (void)cpu.BatchNorm(b, 1); };
  c.plain = [=] { PlainChannels(t, x->get(), kN, kC, kS, b.eps, yp->get()); };
  c.difference = [=] { return Difference(t, yp->get(), y->get(), kTotal); };
  return c;
}

// QK-norm: RMSNorm of q and k, [4096 * 32, 128] each, with an f32 weight.
Case QkNormCase(CpuBackend& cpu, DType t) {
  const int64_t rows = 4096 * 32, cols = 128, each = rows * cols;
  const Shared q = Make(Filled(t, each, 1)), k = Make(Filled(t, each, 2)),
               w = Make(Filled(DType::kF32, cols, 5));
  const Shared qy = Make(Zeroed(t, each)), ky = Make(Zeroed(t, each)), qp = Make(Zeroed(t, each)),
               kp = Make(Zeroed(t, each));
  RowNormArgs a;
  a.kind = RowNormKind::kRms;
  a.rows = rows;
  a.cols = cols;
  a.weight = {DType::kF32, w->get(), cols};
  RowNormArgs aq = a, ak = a;
  aq.x = {t, q->get(), each};
  aq.y = {t, qy->get(), each};
  ak.x = {t, k->get(), each};
  ak.y = {t, ky->get(), each};
  Case c;
  c.dtype = t;
  c.elements = 2 * each;
  c.normd = [&cpu, aq, ak, q, k, w] {
    (void)cpu.RowNorm(aq, 1);
    (void)cpu.RowNorm(ak, 1);
  };
  c.plain = [=] {
    const float* wf = reinterpret_cast<const float*>(w->get());
    PlainRmsRows(t, q->get(), wf, rows, cols, a.eps, qp->get());
    PlainRmsRows(t, k->get(), wf, rows, cols, a.eps, kp->get());
  };
  c.difference = [=] {
    return std::max(Difference(t, qp->get(), qy->get(), each),
                    Difference(t, kp->get(), ky->get(), each));
  };
  return c;
}

// LayerNorm of 1024 rows of 65536 columns with an f32 weight and bias; the plain kernel's
// output pass fetches the next row into L2 or not (`next`).
Case LayerNormCase(CpuBackend& cpu, DType t, bool next) {
  const int64_t rows = 1024, cols = 65536, total = rows * cols;
  const Shared x = Make(Filled(t, total, 1)), w = Make(Filled(DType::kF32, cols, 3)),
               bias = Make(Filled(DType::kF32, cols, 4));
  const Shared y = Make(Zeroed(t, total)), yp = Make(Zeroed(t, total));
  RowNormArgs a;
  a.kind = RowNormKind::kLayer;
  a.eps = kDefaultLayerNormEps;
  a.rows = rows;
  a.cols = cols;
  a.x = {t, x->get(), total};
  a.y = {t, y->get(), total};
  a.weight = {DType::kF32, w->get(), cols};
  a.bias = {DType::kF32, bias->get(), cols};
  Case c;
  c.dtype = t;
  c.elements = total;
  c.normd = [&cpu, a, x, w, bias] { (void)cpu.RowNorm(a, 1); };
  c.plain = [=] {
    PlainLayerRows(t, x->get(), reinterpret_cast<const float*>(w->get()),
                   reinterpret_cast<const float*>(bias->get()), rows, cols, a.eps, next, yp->get());
  };
  c.difference = [=] { return Difference(t, yp->get(), y->get(), total); };
  return c;
}

// A case by name; its buffers are made when it runs.
struct Named {
  std::string name;
  std::function<Case()> make;
};

std::vector<Named> AllCases(CpuBackend& cpu) {
  std::vector<Named> out;
  const std::pair<DType, const char*> dtypes[] = {
      {DType::kF32, "f32"}, {DType::kF16, "f16"}, {DType::kBF16, "bf16"}};
  for (const auto& [t, dt] : dtypes) {
    const DType type = t;  // named copies: clang 14 cannot capture structured bindings
    const std::string name = dt;
    out.push_back({absl::StrCat("instance_norm/", name, "/32x64x56x56"),
                   [&cpu, type] { return InstanceNormCase(cpu, type, true); }});
    out.push_back({absl::StrCat("instance_norm/", name, "/32x56x56x64"),
                   [&cpu, type] { return InstanceNormCase(cpu, type, false); }});
    out.push_back({absl::StrCat("batch_norm_train/", name, "/32x64x56x56"),
                   [&cpu, type] { return BatchNormCase(cpu, type); }});
    out.push_back({absl::StrCat("qk_norm/", name, "/4096x32x128"),
                   [&cpu, type] { return QkNormCase(cpu, type); }});
    out.push_back({absl::StrCat("layer_norm/", name, "/1024x65536"),
                   [&cpu, type] { return LayerNormCase(cpu, type, false); }});
    out.push_back({absl::StrCat("layer_norm/", name, "/1024x65536 (plain: next fetched)"),
                   [&cpu, type] { return LayerNormCase(cpu, type, true); }});
  }
  return out;
}

int Main(int argc, char** argv) {
  std::string filter = ".*";
  double min_time = 1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: normd-plain-bench [--filter REGEX] [--min-time S]\n");
      return 2;
    }
  }
  const std::regex re(filter);
  CpuBackend cpu;
  std::printf(
      "normd-plain-bench: %s; one thread; normd, the plain kernel and memcpy timed in the same "
      "run\n",
      cpu.device().c_str());
  std::printf("%-50s %9s %9s %6s %9s %9s %6s %11s %10s\n", "case", "normd", "memcpy", "ratio",
              "plain", "memcpy", "ratio", "normd/plain", "max diff");
  int failures = 0;
  for (const Named& named : AllCases(cpu)) {
    if (!std::regex_search(named.name, re)) continue;
    Case c = named.make();
    c.normd();
    c.plain();
    const double diff = c.difference();
    const int64_t bytes = 2 * c.elements * ElementSize(c.dtype);
    const size_t half = static_cast<size_t>(bytes / 2);
    Bytes src = AllocatePageAligned(half), dst = AllocatePageAligned(half);
    std::memset(src.get(), 1, half);
    std::memset(dst.get(), 0, half);
    const auto copy = [&] { std::memcpy(dst.get(), src.get(), half); };
    const PairTiming tn = TimeAgainstCopy(c.normd, copy, min_time);
    const PairTiming tp = TimeAgainstCopy(c.plain, copy, min_time);
    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("%-50s %9.2f %9.2f %6.2f %9.2f %9.2f %6.2f %11.2f %10.2g%s\n", named.name.c_str(),
                gb / tn.kernel, gb / tn.copy, tn.ratio, gb / tp.kernel, gb / tp.copy, tp.ratio,
                tp.kernel / tn.kernel, diff, diff <= Tolerance(c.dtype) ? "" : "  FAILED");
    std::fflush(stdout);
    if (diff > Tolerance(c.dtype)) ++failures;
  }
  if (failures > 0) {
    std::fprintf(
        stderr,
        "normd-plain-bench: %d case(s) where the plain kernel's outputs differ from normd's\n",
        failures);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace normd::kernels::bench

int main(int argc, char** argv) { return normd::kernels::bench::Main(argc, argv); }
