// CudaBackend::RowNormBatch: every row-wise op of a ragged batch in one launch. The
// segments' inputs go in one host-to-device copy, the outputs come back in one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_backend_impl.h"

namespace normd::kernels::cuda {

absl::Status CudaBackend::RowNormBatch(absl::Span<const RowNormArgs> segments) {
  // Layout of the call's memory: per segment x, skip, weight, bias (inputs, copied in one
  // transfer; the kernel reads the weight and bias in their own dtype), then the segment
  // and item tables, then y and h (outputs).
  struct Offsets {
    int64_t x, skip, w, b, y, h;
  };
  std::vector<Offsets> off(segments.size());
  Staging st;
  for (size_t i = 0; i < segments.size(); ++i) {
    const RowNormArgs& a = segments[i];
    off[i].x = st.Reserve(Bytes(a.x));
    off[i].skip = st.Reserve(Bytes(a.skip));
    off[i].w = st.Reserve(Bytes(a.weight));
    off[i].b = st.Reserve(Bytes(a.bias));
  }
  std::vector<RowSegment> table(segments.size());
  std::vector<RowItem> items;
  for (size_t i = 0; i < segments.size(); ++i) {
    PlanRowItems(static_cast<int32_t>(i), segments[i].rows, segments[i].cols, &items);
  }
  if (items.empty()) return absl::OkStatus();
  const int64_t table_at = st.Reserve(table.size() * sizeof(RowSegment));
  const int64_t items_at = st.Reserve(items.size() * sizeof(RowItem));
  const int64_t outputs_at = st.size();
  for (size_t i = 0; i < segments.size(); ++i) {
    off[i].y = st.Reserve(Bytes(segments[i].y));
    off[i].h = st.Reserve(Bytes(segments[i].h));
  }
  absl::StatusOr<Call> call = Begin(st.size());
  if (!call.ok()) return call.status();
  char* dev = call->dev;
  char* host = call->host;
  auto stage = [&](int64_t at, const void* src, int64_t n) {
    if (n > 0) std::memcpy(host + at, src, n);
  };
  for (size_t i = 0; i < segments.size(); ++i) {
    const RowNormArgs& a = segments[i];
    stage(off[i].x, a.x.data, Bytes(a.x));
    stage(off[i].skip, a.skip.data, Bytes(a.skip));
    stage(off[i].w, a.weight.data, Bytes(a.weight));
    stage(off[i].b, a.bias.data, Bytes(a.bias));
    RowSegment& s = table[i];
    s = SegmentOf(a);
    s.x = dev + off[i].x;
    s.skip = a.skip.present() ? dev + off[i].skip : nullptr;
    s.weight = a.weight.present() ? dev + off[i].w : nullptr;
    s.bias = a.bias.present() ? dev + off[i].b : nullptr;
    s.y = dev + off[i].y;
    s.h = a.h.present() ? dev + off[i].h : nullptr;
  }
  const std::vector<RowLaunch> launches =
      GroupRowItems(table.data(), &items, MaxRowClusterBlocks());
  stage(table_at, table.data(), table.size() * sizeof(RowSegment));
  stage(items_at, items.data(), items.size() * sizeof(RowItem));
  absl::Status status = Check(
      cudaMemcpyAsync(dev, host, outputs_at, cudaMemcpyHostToDevice, call->stream), "copy in");
  for (const RowLaunch& launch : launches) {
    if (!status.ok()) break;
    status =
        Check(LaunchRowNorm(reinterpret_cast<const RowSegment*>(dev + table_at),
                            reinterpret_cast<const RowItem*>(dev + items_at), launch, call->stream),
              "row kernel");
  }
  if (status.ok()) {
    status = Check(cudaMemcpyAsync(host + outputs_at, dev + outputs_at, st.size() - outputs_at,
                                   cudaMemcpyDeviceToHost, call->stream),
                   "copy out");
  }
  if (status.ok()) status = Check(cudaStreamSynchronize(call->stream), "row norm");
  if (status.ok()) {
    for (size_t i = 0; i < segments.size(); ++i) {
      const RowNormArgs& a = segments[i];
      if (a.y.present()) std::memcpy(a.y.data, host + off[i].y, Bytes(a.y));
      if (a.h.present()) std::memcpy(a.h.data, host + off[i].h, Bytes(a.h));
    }
  } else {
    cudaStreamSynchronize(call->stream);  // nothing may still use the pinned block
  }
  End(*call);
  return status;
}

}  // namespace normd::kernels::cuda
