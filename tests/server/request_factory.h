// Valid NormalizeRequests for each op, built from float values, for tests to use as is or
// to break one field at a time. Not thread-safe.
#ifndef NORMD_TESTS_SERVER_REQUEST_FACTORY_H_
#define NORMD_TESTS_SERVER_REQUEST_FACTORY_H_

#include <cstdint>
#include <vector>

#include "normd/kernels/dtype.h"
#include "normd/v1/normd.pb.h"

namespace normd::testing {

inline void FillTensor(v1::Tensor* t, v1::DataType dtype, std::vector<int64_t> shape,
                       float start = 0.5f) {
  t->set_dtype(dtype);
  t->mutable_shape()->Assign(shape.begin(), shape.end());
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const auto kt = dtype == v1::DATA_TYPE_F16    ? kernels::DType::kF16
                  : dtype == v1::DATA_TYPE_BF16 ? kernels::DType::kBF16
                                                : kernels::DType::kF32;
  std::string* data = t->mutable_data();
  data->assign(n * kernels::ElementSize(kt), '\0');
  for (int64_t i = 0; i < n; ++i) {
    kernels::StoreElement(kt, data->data(), i, start + static_cast<float>((i * 7) % 11) * 0.25f);
  }
}

inline v1::NormalizeRequest LayerNormRequest(std::vector<int64_t> shape = {2, 4}) {
  v1::NormalizeRequest r;
  r.set_id("ln");
  FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, shape);
  auto* p = r.mutable_layer_norm();
  FillTensor(p->mutable_weight(), v1::DATA_TYPE_F32, {shape.back()});
  FillTensor(p->mutable_bias(), v1::DATA_TYPE_F32, {shape.back()});
  return r;
}

inline v1::NormalizeRequest RmsNormRequest(std::vector<int64_t> shape = {2, 4}) {
  v1::NormalizeRequest r;
  r.set_id("rms");
  FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, shape);
  FillTensor(r.mutable_rms_norm()->mutable_weight(), v1::DATA_TYPE_F32, {shape.back()});
  return r;
}

inline v1::NormalizeRequest BatchNormRequest(bool training,
                                             std::vector<int64_t> shape = {2, 4, 3}) {
  v1::NormalizeRequest r;
  r.set_id("bn");
  FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, shape);
  auto* p = r.mutable_batch_norm();
  p->set_training(training);
  FillTensor(p->mutable_running_mean(), v1::DATA_TYPE_F32, {shape[1]});
  FillTensor(p->mutable_running_var(), v1::DATA_TYPE_F32, {shape[1]}, 1.0f);
  return r;
}

inline v1::NormalizeRequest GroupNormRequest(int groups, std::vector<int64_t> shape = {2, 8, 4}) {
  v1::NormalizeRequest r;
  r.set_id("gn");
  FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, shape);
  r.mutable_group_norm()->set_num_groups(groups);
  return r;
}

inline v1::NormalizeRequest InstanceNormRequest(std::vector<int64_t> shape = {2, 3, 5}) {
  v1::NormalizeRequest r;
  r.set_id("in");
  FillTensor(r.mutable_input(), v1::DATA_TYPE_F32, shape);
  r.mutable_instance_norm();
  return r;
}

inline v1::NormalizeRequest QkNormRequest(int64_t q_dim = 8, int64_t k_dim = 8) {
  v1::NormalizeRequest r;
  r.set_id("qk");
  auto* p = r.mutable_qk_norm();
  FillTensor(p->mutable_q(), v1::DATA_TYPE_BF16, {3, 2, q_dim});
  FillTensor(p->mutable_k(), v1::DATA_TYPE_BF16, {3, 1, k_dim});
  FillTensor(p->mutable_q_weight(), v1::DATA_TYPE_F32, {q_dim});
  FillTensor(p->mutable_k_weight(), v1::DATA_TYPE_F32, {k_dim});
  return r;
}

// One valid request of each op and form: every family, both BatchNorm modes, a fused
// residual add with its sum returned.
inline std::vector<v1::NormalizeRequest> OneOfEachOp() {
  std::vector<v1::NormalizeRequest> r = {LayerNormRequest({3, 2, 5}),
                                         RmsNormRequest({4, 6}),
                                         BatchNormRequest(true),
                                         BatchNormRequest(false),
                                         GroupNormRequest(2),
                                         InstanceNormRequest(),
                                         QkNormRequest()};
  v1::NormalizeRequest fused = RmsNormRequest({2, 4});
  FillTensor(fused.mutable_rms_norm()->mutable_residual()->mutable_skip(), v1::DATA_TYPE_F32,
             {2, 4});
  fused.mutable_rms_norm()->mutable_residual()->set_return_sum(true);
  r.push_back(fused);
  return r;
}

}  // namespace normd::testing

#endif  // NORMD_TESTS_SERVER_REQUEST_FACTORY_H_
