// A validated unit of work for a backend: one op family and its kernel arguments, with
// no protobuf in sight. Transport builds it (request_builder.h) with pointers into the
// request's tensor bytes and into the response's output buffers; the scheduler runs it.
// Plain value; the memory its arguments point to must outlive the run.
#ifndef NORMD_SCHEDULING_JOB_H_
#define NORMD_SCHEDULING_JOB_H_

#include <cstdint>

#include "normd/kernels/ops.h"

namespace normd::server {

enum class BackendPreference : uint8_t { kAuto, kCpu, kCuda };

struct Job {
  enum class Family : uint8_t { kRowNorm, kQkNorm, kBatchNorm, kGroupNorm };
  Family family = Family::kRowNorm;
  kernels::RowNormArgs row;      // kRowNorm; kQkNorm: q
  kernels::RowNormArgs row_k;    // kQkNorm: k
  kernels::BatchNormArgs batch;  // kBatchNorm (also InstanceNorm without input stats)
  kernels::GroupNormArgs group;  // kGroupNorm (also InstanceNorm with input stats)
  BackendPreference preference = BackendPreference::kAuto;
  int64_t input_bytes = 0;  // for routing
  bool empty = false;       // a zero-sized dimension: outputs are empty, nothing to run
};

}  // namespace normd::server

#endif  // NORMD_SCHEDULING_JOB_H_
