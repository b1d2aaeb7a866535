// Non-owning views of tensor bytes as the kernels see them: a dtype, a pointer and an
// element count. Shapes stay in the transport room; kernels get rows/cols/channels in
// their argument structs. Plain values: safe to copy between threads; the memory they
// point to must outlive the call that uses them.
#ifndef NORMD_KERNELS_TENSOR_H_
#define NORMD_KERNELS_TENSOR_H_

#include <cstdint>

#include "normd/kernels/dtype.h"

namespace normd::kernels {

// Read-only elements. data == nullptr means "absent" (an optional parameter not given).
struct ConstTensor {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t numel = 0;

  bool present() const { return data != nullptr; }
  float at(int64_t i) const { return LoadElement(dtype, data, i); }
};

// Writable elements. data == nullptr means "not requested".
struct MutTensor {
  DType dtype = DType::kF32;
  void* data = nullptr;
  int64_t numel = 0;

  bool present() const { return data != nullptr; }
  void set(int64_t i, float v) const { StoreElement(dtype, data, i, v); }
};

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_TENSOR_H_
