// The host-side fields of the kernels' argument tables (device_ops.h) from the ops'
// arguments (ops.h), shared by the CUDA backend (cuda_row_batch.cu, cuda_channel_run.cu)
// and normd-kernel-bench --cuda (kernels/bench/cuda_bench.cc); each fills in the device
// pointers itself. Pure functions; safe from any thread.
#ifndef NORMD_KERNELS_CUDA_LAUNCH_ARGS_H_
#define NORMD_KERNELS_CUDA_LAUNCH_ARGS_H_

#include <cstdint>
#include <vector>

#include "kernels/cuda/device_ops.h"
#include "normd/kernels/ops.h"

namespace normd::kernels::cuda {

// A tensor's bytes (0 when absent), what a call stages or uploads of it.
inline int64_t Bytes(const ConstTensor& t) {
  return t.present() ? t.numel * ElementSize(t.dtype) : 0;
}
inline int64_t Bytes(const MutTensor& t) {
  return t.present() ? t.numel * ElementSize(t.dtype) : 0;
}

inline int32_t Code(DType t) {
  return t == DType::kF32 ? kDevF32 : (t == DType::kF16 ? kDevF16 : kDevBF16);
}

// What the row kernel adds to the weight in fp32, as the CPU does: RMSNorm's offset
// (Gemma's 1 + w).
inline float WeightOffset(const RowNormArgs& a) {
  return a.kind == RowNormKind::kRms ? static_cast<float>(a.weight_offset) : 0.0f;
}

// A's segment, its pointers null.
inline RowSegment SegmentOf(const RowNormArgs& a) {
  RowSegment s{};
  s.kind = static_cast<int32_t>(a.kind);
  s.x_dtype = Code(a.x.dtype);
  s.y_dtype = Code(a.y.dtype);
  s.eps_inside = a.eps_placement == EpsPlacement::kInsideSqrt;
  s.cast_before_weight = a.cast_before_weight;
  s.residual = static_cast<int32_t>(a.residual);
  s.rows = a.rows;
  s.cols = a.cols;
  s.partial_m = a.kind == RowNormKind::kRms ? PartialCount(a.partial_fraction, a.cols) : a.cols;
  s.eps = a.eps;
  s.alpha = static_cast<float>(a.alpha);
  s.w_dtype = a.weight.present() ? Code(a.weight.dtype) : kDevF32;
  s.b_dtype = a.bias.present() ? Code(a.bias.dtype) : kDevF32;
  s.w_offset = WeightOffset(a);
  return s;
}

// The channel kernels' arguments of a BatchNorm (statistics per channel: groups 0) or a
// GroupNorm, their pointers null.
template <class Args>  // BatchNormArgs or GroupNormArgs
inline ChannelArgs ChannelArgsFor(const Args& a, int64_t groups) {
  ChannelArgs ca{};
  ca.n = a.n;
  ca.c = a.c;
  ca.s = a.s;
  ca.groups = groups;
  // With one position a sample, both layouts are [N, C] in memory; channels-last's kernels
  // read it a row at a time.
  ca.channels_last = a.layout == Layout::kChannelsLast || a.s == 1;
  ca.x_dtype = Code(a.x.dtype);
  ca.y_dtype = Code(a.y.dtype);
  ca.w_dtype = a.weight.present() ? Code(a.weight.dtype) : kDevF32;
  ca.b_dtype = a.bias.present() ? Code(a.bias.dtype) : kDevF32;
  ca.eps = a.eps;
  return ca;
}
inline ChannelArgs ChannelArgsOf(const BatchNormArgs& a) { return ChannelArgsFor(a, 0); }
inline ChannelArgs ChannelArgsOf(const GroupNormArgs& a) { return ChannelArgsFor(a, a.groups); }

// Inference BatchNorm's statistics as the apply kernel reads them: mean[c], then var[c].
inline std::vector<double> RunningStats(const BatchNormArgs& a) {
  std::vector<double> stats(a.c * 2);
  for (int64_t c = 0; c < a.c; ++c) {
    stats[c] = a.running_mean.at(c);
    stats[a.c + c] = a.running_var.at(c);
  }
  return stats;
}

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_LAUNCH_ARGS_H_
