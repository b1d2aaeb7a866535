// normd-kernel-bench --cuda: the CUDA kernels (kernels/cuda/) timed on tensors already in
// device memory, beside a device-to-device copy moving the same traffic, in the same run.
//
// A call is what the CUDA backend launches for one request once its inputs are on the
// device (cuda_row_batch.cu, cuda_channel_run.cu), built from the same plans and tables
// (device_ops.h, launch_args.h): the row kernel, or the statistics (with the apply pass's
// parameters) and apply kernels of a channel op (inference BatchNorm: the parameters from the
// running statistics, then the apply). The host<->device copies of the backend's staging are not
// part of it: they are the transport's share of a request, not the kernels'.
//
// Bytes counted and the copy: as normd-kernel-bench's CPU rows (bench_cases.cc), and the
// copy moves the same traffic (half the bytes, read once and written once). Timing: CUDA
// events around batches of back-to-back calls on one stream, kernel and copy batches
// alternating (7 of each, about min_time / 7 seconds a kernel batch); GB/s are medians, the
// ratio the median of neighbouring batches' ratios. For cases under 1 MiB it also prints
// microseconds per call: in a batch, and alone (events around one call on an idle stream,
// median of 101, the host's launching of its kernels included), the figure the [1, 4096]
// target reads.
//
// Each case's outputs are copied back once and compared with the CPU backend's on the same
// inputs, so that the figures are of the op asked: a largest difference beyond 2e-4 of the
// largest output in f32, or four units in the last place of 1 in f16/bf16 (bench_check.h),
// fails the program; the accuracy rule itself is the GPU suite's (tests/gpu).
#include "kernels/bench/cuda_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/bench/bench_cases.h"
#include "kernels/bench/bench_check.h"
#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/launch_args.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels::bench {
namespace {

using cuda::Bytes;
using cuda::ChannelArgs;
using cuda::RowItem;
using cuda::RowSegment;

// Ends the program on a failed CUDA call: a benchmark with a broken device has nothing
// to say.
void Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "normd-kernel-bench --cuda: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// Device memory of one case, freed together.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    for (void* p : blocks_) cudaFree(p);
  }
  void* Alloc(int64_t bytes) {
    void* p = nullptr;
    Ok(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))), "cudaMalloc");
    blocks_.push_back(p);
    return p;
  }
  void* Upload(const void* host, int64_t bytes) {
    void* p = Alloc(bytes);
    if (bytes > 0) Ok(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), "copy in");
    return p;
  }
  template <class T>
  void* Upload(const T& t) {
    return t.present() ? Upload(t.data, Bytes(t)) : nullptr;
  }

 private:
  std::vector<void*> blocks_;
};

// An output to compare: where it is on the device and what the CPU backend wrote.
struct Output {
  const void* dev;
  DType dtype;
  int64_t n;
  std::vector<unsigned char> expect;
};

// One case on the device: the launches of one call, and its outputs.
struct DeviceCase {
  std::vector<std::function<cudaError_t(cudaStream_t)>> launches;
  std::vector<Output> outputs;
};

Output Expect(const void* dev, const MutTensor& host) {
  const auto* p = static_cast<const unsigned char*>(host.data);
  return {dev, host.dtype, host.numel, std::vector<unsigned char>(p, p + Bytes(host))};
}

// The launches of one RowNorm call (cuda_row_batch.cu with one segment).
void AddRowCall(const RowNormArgs& a, DeviceMemory& mem, DeviceCase* dc) {
  RowSegment s = cuda::SegmentOf(a);
  s.x = mem.Upload(a.x);
  s.skip = mem.Upload(a.skip);
  s.weight = mem.Upload(a.weight);
  s.bias = mem.Upload(a.bias);
  s.y = mem.Alloc(Bytes(a.y));
  s.h = a.h.present() ? mem.Alloc(Bytes(a.h)) : nullptr;
  std::vector<RowItem> items;
  cuda::PlanRowItems(0, a.rows, a.cols, &items);
  const std::vector<cuda::RowLaunch> launches =
      cuda::GroupRowItems(&s, &items, cuda::MaxRowClusterBlocks());
  const auto* table = static_cast<const RowSegment*>(mem.Upload(&s, sizeof(s)));
  const auto* dev_items =
      static_cast<const RowItem*>(mem.Upload(items.data(), items.size() * sizeof(RowItem)));
  for (const cuda::RowLaunch& launch : launches) {
    dc->launches.push_back(
        [=](cudaStream_t st) { return cuda::LaunchRowNorm(table, dev_items, launch, st); });
  }
  dc->outputs.push_back(Expect(s.y, a.y));
  if (a.h.present()) dc->outputs.push_back(Expect(s.h, a.h));
}

// The launches of one BatchNorm or GroupNorm call (cuda_channel_run.cu): `ca` from
// ChannelArgsOf, `stats` the running statistics (RunningStats) for inference, else empty.
void AddChannelCall(ChannelArgs ca, const ConstTensor& x, const ConstTensor& weight,
                    const ConstTensor& bias, const MutTensor& y, const std::vector<double>& stats,
                    int sms, DeviceMemory& mem, DeviceCase* dc) {
  const int64_t sets = ca.groups == 0 ? ca.c : ca.n * ca.groups;
  const bool given = !stats.empty();
  const int splits = given ? 0 : cuda::ChannelStatsSplits(ca, sms);
  ca.x = mem.Upload(x);
  ca.y = mem.Alloc(Bytes(y));
  auto* mean = static_cast<double*>(given ? mem.Upload(stats.data(), sets * 2 * sizeof(double))
                                          : mem.Alloc(sets * 2 * 8));
  double* var = mean + sets;
  auto* partials = static_cast<double*>(mem.Alloc(sets * std::max(splits, 1) * 3 * 8));
  auto* params = static_cast<float4*>(mem.Alloc(cuda::ChannelParamCount(ca) * sizeof(float4)));
  ca.weight = mem.Upload(weight);
  ca.bias = mem.Upload(bias);
  if (given) {
    dc->launches.push_back(
        [=](cudaStream_t st) { return cuda::LaunchChannelParams(ca, mean, var, params, st); });
  } else {
    dc->launches.push_back([=](cudaStream_t st) {
      return cuda::LaunchChannelStats(ca, splits, partials, mean, var, params, st);
    });
  }
  dc->launches.push_back([=](cudaStream_t st) { return cuda::LaunchChannelApply(ca, params, st); });
  dc->outputs.push_back(Expect(ca.y, y));
}

void CpuOk(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "normd-kernel-bench --cuda: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

// The case's calls on the device, and the CPU backend's outputs for them (run first, on the
// case's host buffers; no call writes its own inputs).
DeviceCase Prepare(const BenchCase::Calls& calls, CpuBackend& cpu, int sms, DeviceMemory& mem) {
  DeviceCase dc;
  for (const RowNormArgs& a : calls.rows) {
    CpuOk(cpu.RowNorm(a), "the CPU backend's row call");
    AddRowCall(a, mem, &dc);
  }
  if (calls.batch_norm != nullptr) {
    const BatchNormArgs& a = *calls.batch_norm;
    CpuOk(cpu.BatchNorm(a), "the CPU backend's BatchNorm");
    AddChannelCall(cuda::ChannelArgsOf(a), a.x, a.weight, a.bias, a.y,
                   a.training ? std::vector<double>() : cuda::RunningStats(a), sms, mem, &dc);
  }
  if (calls.group_norm != nullptr) {
    const GroupNormArgs& a = *calls.group_norm;
    CpuOk(cpu.GroupNorm(a), "the CPU backend's GroupNorm");
    AddChannelCall(cuda::ChannelArgsOf(a), a.x, a.weight, a.bias, a.y, {}, sms, mem, &dc);
  }
  return dc;
}

// The largest difference between `out` (copied back from the device) and the CPU
// backend's output, relative to the largest |output| (bench_check.h).
double DifferenceFromCpu(const Output& out) {
  std::vector<unsigned char> got(out.expect.size());
  Ok(cudaMemcpy(got.data(), out.dev, got.size(), cudaMemcpyDeviceToHost), "copy out");
  return Difference(out.dtype, got.data(), out.expect.data(), out.n);
}

// Events around batches on one stream.
class Timer {
 public:
  explicit Timer(cudaStream_t stream) : stream_(stream) {
    Ok(cudaEventCreate(&start_), "cudaEventCreate");
    Ok(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // Seconds per call of `iters` back-to-back calls of fn.
  double Batch(const std::function<void()>& fn, int64_t iters) {
    Ok(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int64_t i = 0; i < iters; ++i) fn();
    Ok(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    Ok(cudaEventSynchronize(stop_), "the timed batch");
    float ms = 0;
    Ok(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms * 1e-3 / static_cast<double>(iters);
  }
  // Calls per batch for a batch of at least `seconds` (after a warm-up call).
  int64_t Calibrate(const std::function<void()>& fn, double seconds) {
    Batch(fn, 1);
    int64_t iters = 1;
    while (Batch(fn, iters) * static_cast<double>(iters) < seconds && iters < (int64_t{1} << 24)) {
      iters *= 2;
    }
    return iters;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string op, dtype, shape;
  int64_t bytes;
  double gbps, copy_gbps, ratio, us_batched, us_alone, copy_us;
  double difference;  // from the CPU backend's output (DifferenceFromCpu)
};

}  // namespace

int RunCudaBench(const CudaBenchFlags& flags) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || flags.device >= count) {
    std::fprintf(stderr, "normd-kernel-bench --cuda: no CUDA device %d (%d found): %s\n",
                 flags.device, count, cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  Ok(cudaSetDevice(flags.device), "cudaSetDevice");
  cudaDeviceProp prop;
  Ok(cudaGetDeviceProperties(&prop, flags.device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaStream_t stream;
  Ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Timer timer(stream);
  CpuBackend cpu;
  const std::regex re(flags.filter);
  std::printf(
      "normd-kernel-bench --cuda: %s, sm_%d%d, %d SMs, %zu MiB, driver %d, runtime %d; kernels on "
      "device-resident tensors and a device-to-device copy of the same traffic, timed with CUDA "
      "events in the same run\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem >> 20,
      driver, runtime);
  std::printf("%-22s %-5s %-16s %9s %9s %6s %10s %10s %10s %9s\n", "op", "dtype", "shape", "GB/s",
              "copy", "ratio", "us/call", "us alone", "copy us", "vs cpu");
  std::vector<Row> rows;
  int64_t wrong_cases = 0;
  for (BenchCase& c : AllCases()) {
    if (!std::regex_search(absl::StrCat(c.op, "/", c.dtype, "/", c.shape), re)) continue;
    c.setup();
    {
      DeviceMemory mem;
      const DeviceCase dc = Prepare(c.calls(), cpu, prop.multiProcessorCount, mem);
      const int64_t half = c.bytes / 2;
      void* src = mem.Alloc(half);
      void* dst = mem.Alloc(half);
      Ok(cudaMemset(src, 1, half), "cudaMemset");
      const auto call = [&] {
        for (const auto& launch : dc.launches) Ok(launch(stream), "a kernel launch");
      };
      const auto copy = [&] {
        Ok(cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice, stream), "the copy");
      };
      Ok(cudaDeviceSynchronize(), "the uploads");
      call();
      Ok(cudaStreamSynchronize(stream), "the first call");
      double difference = 0;
      bool wrong = false;
      for (const Output& out : dc.outputs) {
        const double d = DifferenceFromCpu(out);
        difference = std::max(difference, d);
        wrong = wrong || !(d <= Tolerance(out.dtype));
      }
      constexpr int kRepeats = 7;
      const int64_t k_iters = timer.Calibrate(call, flags.min_time / kRepeats);
      const int64_t c_iters = timer.Calibrate(copy, flags.min_time / kRepeats);
      std::vector<double> kt, ct, ratios;
      for (int r = 0; r < kRepeats; ++r) {
        kt.push_back(timer.Batch(call, k_iters));
        ct.push_back(timer.Batch(copy, c_iters));
        ratios.push_back(ct.back() / kt.back());
      }
      Row row{c.op,
              c.dtype,
              c.shape,
              c.bytes,
              c.bytes / Median(kt) / 1e9,
              c.bytes / Median(ct) / 1e9,
              Median(ratios),
              Median(kt) * 1e6,
              0,
              Median(ct) * 1e6,
              difference};
      if (c.bytes < (1 << 20)) {
        std::vector<double> alone;
        for (int i = 0; i < 101; ++i) alone.push_back(timer.Batch(call, 1));
        row.us_alone = Median(alone) * 1e6;
      }
      const std::string small =
          row.us_alone > 0
              ? absl::StrFormat("%10.2f %10.2f %10.2f", row.us_batched, row.us_alone, row.copy_us)
              : absl::StrFormat("%10s %10s %10s", "", "", "");
      std::printf("%-22s %-5s %-16s %9.1f %9.1f %6.2f %s %9.2e%s\n", c.op.c_str(), c.dtype.c_str(),
                  c.shape.c_str(), row.gbps, row.copy_gbps, row.ratio, small.c_str(), difference,
                  wrong ? "  FAILED" : "");
      std::fflush(stdout);
      if (wrong) ++wrong_cases;
      rows.push_back(row);
    }
    c.teardown();
  }
  cudaStreamDestroy(stream);
  if (!flags.json.empty()) {
    std::vector<std::string> objs;
    for (const Row& r : rows) {
      objs.push_back(absl::StrCat(
          "{\"op\": \"", r.op, "\", \"dtype\": \"", r.dtype, "\", \"shape\": \"", r.shape,
          "\", \"backend\": \"cuda\", \"gbps\": ", r.gbps, ", \"copy_gbps\": ", r.copy_gbps,
          ", \"ratio\": ", r.ratio, ", \"us_per_call\": ", r.us_batched,
          ", \"us_alone\": ", r.us_alone, ", \"bytes\": ", r.bytes, ", \"difference_vs_cpu\": ",
          // JSON has no infinity (a NaN on one side only).
          std::isfinite(r.difference) ? absl::StrCat(r.difference) : "null", "}"));
    }
    std::ofstream(flags.json) << "[\n  " << absl::StrJoin(objs, ",\n  ") << "\n]\n";
  }
  if (wrong_cases > 0) {
    std::fprintf(stderr, "normd-kernel-bench --cuda: %lld case(s) differ from the CPU backend\n",
                 static_cast<long long>(wrong_cases));
    return 1;
  }
  return 0;
}

}  // namespace normd::kernels::bench
