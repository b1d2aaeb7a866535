// normd-kernel-bench: throughput of the CPU kernels beside their physical limit, measured
// in the same run. For each op x dtype x shape it times the CPU backend (one thread and
// all threads), the float64 reference, and memcpy moving the same number of bytes (one
// thread and all threads), and prints GB/s and kernel/memcpy ratios, and for cases under
// 1 MiB the nanoseconds per call of the kernel and of memcpy on one thread (both in cache).
// The kernel and memcpy run in alternating timed batches; GB/s are medians, and the ratio
// is the median of the neighbouring batches' ratios, which share the VM's bandwidth drift.
//
// Bytes counted: every byte the op must read and write once (x and y; plus skip and h for
// fused residuals, skip for NORM_THEN_ADD; BatchNorm training and GroupNorm/InstanceNorm count x
// twice when a channel or group is larger than the L2 cache, since statistics and output are then
// two passes over memory). memcpy copies half that many bytes, so it moves the same traffic.
//
// With --spaced-us N it measures instead what a server sees between requests: each call
// preceded by a sleep of N microseconds, so that the pool's workers have gone to sleep and
// must be woken; it prints the median microseconds per call on one thread and on all
// threads, and their ratio (all threads' time over one thread's: above 1, the workers cost
// more than they gave).
//
// With --offset N every buffer of a case (inputs, outputs, weight and bias) starts N bytes
// past a page (N a multiple of 4, at most 4096), as a server's do: a request's tensors are
// parsed protobuf `bytes` fields (16 bytes past a page for large ones). Without it they
// start on a page (AllocatePageAligned), and memcpy's buffers always do.
//
// With --params input the row ops' weight and bias are in the input's dtype, as a bf16 or
// f16 model's are (the backend reads them in place where their output fits in cache, and
// widens them once a call otherwise); by default they are fp32.
//
// With --memory-probe it first measures one thread's memcpy and read of a 16 MiB and a 1 GiB
// buffer (memory_probe.h) and prints them above the table: on a VM whose host has a large
// shared last-level cache, the cases' "memory" (tens to hundreds of MiB) is partly that cache,
// by a share that moves from day to day; the probe records the day's. In the JSON, rows of
// backend "memory" (op "memcpy" and "read", shape the buffer's size).
//
// With --cuda it times the CUDA kernels instead, on device-resident tensors beside a
// device-to-device copy (cuda_bench.cc).
//
//   normd-kernel-bench [--filter REGEX] [--json FILE] [--min-time SECONDS] [--no-reference]
//                      [--stream-bytes N] [--min-parallel-bytes N]   (tuning the backend)
//                      [--spaced-us N] [--offset N] [--params f32|input] [--memory-probe]
//   normd-kernel-bench --cuda [--device N] [--filter REGEX] [--json FILE] [--min-time SECONDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hwy/targets.h"
#include "kernels/bench/bench_cases.h"
#include "kernels/bench/bench_inputs.h"
#include "kernels/bench/bench_timing.h"
#include "kernels/bench/cuda_bench.h"
#include "kernels/bench/memory_probe.h"
#include "kernels/cpu/thread_pool.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Median seconds per call of fn over `repeats` timed batches of at least min_time/repeats.
double TimePerCall(const std::function<void()>& fn, double min_time, int repeats = 5) {
  fn();  // warm up (page faults, caches, thread wake-up)
  std::vector<double> per_call;
  int64_t iters = 1;
  for (int r = 0; r < repeats; ++r) {
    for (;;) {
      const auto start = Clock::now();
      for (int64_t i = 0; i < iters; ++i) fn();
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      if (t >= min_time / repeats || iters > (int64_t{1} << 30)) {
        per_call.push_back(t / iters);
        break;
      }
      iters *= 2;
    }
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// Median seconds per call of fn, each call timed alone after a sleep of gap_us: calls
// until min_time has been spent in them, 21 to 401 of them.
double TimeSpaced(const std::function<void()>& fn, int gap_us, double min_time) {
  fn();  // warm up
  std::vector<double> t;
  double spent = 0;
  while (t.size() < 21 || (spent < min_time && t.size() < 401)) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    spent += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  std::string op, dtype, shape, backend;
  int threads;
  double gbps, memcpy_gbps;
  double ratio;  // the median of alternating batches' ratios (TimeAgainstCopy)
  int64_t bytes;
};

int Main(int argc, char** argv) {
  std::string filter = ".*", json_path;
  double min_time = 0.25;
  bool reference = true;
  int spaced_us = 0;
  int64_t offset = 0;
  bool typed_params = false;
  bool cuda = false;
  bool probe = false;
  int device = 0;
  CpuBackendOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else if (a == "--stream-bytes" && i + 1 < argc) {
      options.stream_bytes = std::atoll(argv[++i]);
    } else if (a == "--min-parallel-bytes" && i + 1 < argc) {
      options.min_parallel_bytes = std::atoll(argv[++i]);
    } else if (a == "--target" && i + 1 < argc) {
      // Pin Highway's dispatch to one compiled target (AVX3, AVX2, SSE4, ...).
      const std::string want = argv[++i];
      for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
        if (want == hwy::TargetName(t)) hwy::SetSupportedTargetsForTest(t);
      }
    } else if (a == "--spaced-us" && i + 1 < argc) {
      spaced_us = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--offset" && i + 1 < argc && std::atoll(argv[i + 1]) % 4 == 0 &&
               std::atoll(argv[i + 1]) >= 0 && std::atoll(argv[i + 1]) <= 4096) {
      offset = std::atoll(argv[++i]);  // whole f32 elements, as malloc places them
    } else if (a == "--params" && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "f32") == 0 || std::strcmp(argv[i + 1], "input") == 0)) {
      typed_params = std::strcmp(argv[++i], "input") == 0;
    } else if (a == "--memory-probe") {
      probe = true;
    } else if (a == "--no-reference") {
      reference = false;
    } else if (a == "--cuda") {
      cuda = true;
    } else if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: normd-kernel-bench [--filter REGEX] [--json FILE] [--min-time S] "
                   "[--no-reference] [--stream-bytes N] [--min-parallel-bytes N] [--target NAME] "
                   "[--spaced-us N] [--offset N] [--params f32|input] [--memory-probe]\n"
                   "       normd-kernel-bench --cuda [--device N] [--filter REGEX] [--json FILE] "
                   "[--min-time S]\n");
      return 2;
    }
  }
  if (cuda) return RunCudaBench({filter, json_path, min_time, device});
  const std::regex re(filter);
  CpuBackend cpu(options);
  const int all = cpu.threads();
  cpu::ThreadPool copy_pool(all);
  if (spaced_us > 0) {
    std::printf("normd-kernel-bench: %s; calls %d us apart, median us per call\n",
                cpu.device().c_str(), spaced_us);
    std::printf("%-22s %-5s %-16s %9s %9s %9s\n", "op", "dtype", "shape", "1t us", "all us",
                "all/1t");
    for (BenchCase& c : AllCases(offset, typed_params)) {
      if (!std::regex_search(absl::StrCat(c.op, "/", c.dtype, "/", c.shape), re)) continue;
      c.setup();
      const double one = TimeSpaced([&] { c.run(cpu, 1); }, spaced_us, min_time);
      const double many = TimeSpaced([&] { c.run(cpu, all); }, spaced_us, min_time);
      std::printf("%-22s %-5s %-16s %9.1f %9.1f %9.2f\n", c.op.c_str(), c.dtype.c_str(),
                  c.shape.c_str(), one * 1e6, many * 1e6, many / one);
      std::fflush(stdout);
      c.teardown();
    }
    return 0;
  }
  std::printf("normd-kernel-bench: %s; memcpy and kernels timed in the same run%s\n",
              cpu.device().c_str(),
              typed_params ? "; row ops' weight and bias in the input's dtype" : "");
  std::vector<Row> rows;
  if (probe) {
    std::vector<std::string> parts;
    for (const MemoryProbe& m : ProbeMemory({size_t{16} << 20, size_t{1} << 30}, 1.0)) {
      const std::string size = absl::StrCat(m.bytes >> 20, "MiB");
      parts.push_back(absl::StrFormat("%s buffers, memcpy %.1f GB/s and reading %.1f GB/s", size,
                                      m.copy_gbps, m.read_gbps));
      const int64_t bytes = static_cast<int64_t>(m.bytes);
      rows.push_back({"memcpy", "u8", size, "memory", 1, m.copy_gbps, m.copy_gbps, 1.0, 2 * bytes});
      rows.push_back({"read", "u8", size, "memory", 1, m.read_gbps, m.copy_gbps,
                      m.read_gbps / m.copy_gbps, bytes});
    }
    std::printf("memory, one thread (memcpy counts bytes read and written): %s\n",
                absl::StrJoin(parts, "; ").c_str());
  }
  std::printf("%-22s %-5s %-16s %9s %9s %6s %9s %9s %6s %9s %16s\n", "op", "dtype", "shape",
              "1t GB/s", "memcpy", "ratio", "all GB/s", "memcpy", "ratio", "ref GB/s",
              "1t ns (memcpy)");
  for (BenchCase& c : AllCases(offset, typed_params)) {
    const std::string name = absl::StrCat(c.op, "/", c.dtype, "/", c.shape);
    if (!std::regex_search(name, re)) continue;
    c.setup();
    // memcpy of the same traffic: half the bytes, read once and written once.
    const size_t half = static_cast<size_t>(c.bytes / 2);
    PageBytes src = AllocatePageAligned(half), dst = AllocatePageAligned(half);
    std::memset(src.get(), 1, half);
    std::memset(dst.get(), 0, half);
    struct CopyJob {
      unsigned char* dst;
      const unsigned char* src;
      size_t half;
      int threads;
    };
    auto copy = [&](int threads) {
      // The backend's policy: below min_parallel_bytes one thread is faster.
      if (c.bytes < cpu.options().min_parallel_bytes) threads = 1;
      const CopyJob job{dst.get(), src.get(), half, threads};
      // One pointer captured, as the kernel's own ParallelFor call captures one reference:
      // a larger closure made std::function allocate and free on every copy, which the
      // kernel's calls do not (perf); the 1x4096 cases' memcpy medians dropped by 20-180 ns
      // of 200-430 (BENCHMARKS.md, issue 16, forty-eighth session).
      // The job's bytes, as the kernels pass theirs (the pool's wake-up policy).
      copy_pool.ParallelFor(threads, threads, c.bytes, [j = &job](int64_t b, int64_t e) {
        const size_t lo = j->half * b / j->threads, hi = j->half * e / j->threads;
        std::memcpy(j->dst + lo, j->src + lo, hi - lo);
      });
    };
    double g[2], m[2], ratio[2];
    int threads[2] = {1, all};
    for (int k = 0; k < 2; ++k) {
      const PairTiming t =
          TimeAgainstCopy([&] { c.run(cpu, threads[k]); }, [&] { copy(threads[k]); }, min_time);
      g[k] = c.bytes / t.kernel / 1e9;
      m[k] = c.bytes / t.copy / 1e9;
      ratio[k] = t.ratio;
      rows.push_back({c.op, c.dtype, c.shape, "cpu", threads[k], g[k], m[k], ratio[k], c.bytes});
    }
    double ref = 0;
    if (reference && c.reference) {
      ref = c.bytes / TimePerCall(c.reference, min_time / 5, 1) / 1e9;
      rows.push_back({c.op, c.dtype, c.shape, "reference", 1, ref, m[0], ref / m[0], c.bytes});
    }
    const std::string ns = c.bytes < (1 << 20) ? absl::StrFormat("%.0f (%.0f)", c.bytes / g[0],
                                                                 c.bytes / m[0])  // bytes / (GB/s)
                                               : "";
    std::printf("%-22s %-5s %-16s %9.2f %9.2f %6.2f %9.2f %9.2f %6.2f %9.3f %16s\n", c.op.c_str(),
                c.dtype.c_str(), c.shape.c_str(), g[0], m[0], ratio[0], g[1], m[1], ratio[1], ref,
                ns.c_str());
    std::fflush(stdout);
    c.teardown();
  }
  if (!json_path.empty()) {
    std::vector<std::string> objs;
    for (const Row& r : rows) {
      objs.push_back(absl::StrCat("{\"op\": \"", r.op, "\", \"dtype\": \"", r.dtype,
                                  "\", \"shape\": \"", r.shape, "\", \"threads\": ", r.threads,
                                  ", \"backend\": \"", r.backend, "\", \"gbps\": ", r.gbps,
                                  ", \"memcpy_gbps\": ", r.memcpy_gbps, ", \"ratio\": ", r.ratio,
                                  ", \"bytes\": ", r.bytes, "}"));
    }
    std::ofstream(json_path) << "[\n  " << absl::StrJoin(objs, ",\n  ") << "\n]\n";
  }
  return 0;
}

}  // namespace
}  // namespace normd::kernels::bench

int main(int argc, char** argv) { return normd::kernels::bench::Main(argc, argv); }
