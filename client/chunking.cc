#include "chunking.h"

#include <algorithm>
#include <initializer_list>

#include "absl/algorithm/container.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/util/field_mask_util.h"
#include "google/rpc/status.pb.h"
#include "normd/v1/normd.grpc.pb.h"
#include "wire_size.h"

namespace normd {
namespace {

// `t` cut into rows of its last `k` dims; false when it is not a well-formed tensor of at
// least that rank (the server will say why, to the whole request).
bool Describe(const v1::Tensor& t, int k, ChunkedTensor* out) {
  const int rank = t.shape_size();
  const int64_t size = WireElementSize(t.dtype());
  if (size == 0 || k < 1 || rank < k || rank > 8) return false;
  int64_t rows = 1, row = 1;
  for (int d = 0; d < rank; ++d) {
    const int64_t n = t.shape(d);
    if (n < 0 || n > (int64_t{1} << 40)) return false;
    (d < rank - k ? rows : row) *= n;
    if (rows > (int64_t{1} << 40) || row > (int64_t{1} << 40)) return false;
  }
  if (static_cast<int64_t>(t.data().size()) != rows * row * size) return false;
  out->shape.assign(t.shape().begin(), t.shape().end());
  out->row_dims.assign(t.shape().end() - k, t.shape().end());
  out->rows = rows;
  out->row_bytes = row * size;
  return true;
}

// The accessors of the request's row tensors, by op, and the field numbers from the
// request down to their bytes (chunk_wire.h).
using MutableAt = v1::Tensor* (*)(v1::NormalizeRequest*);
using At = const v1::Tensor* (*)(const v1::NormalizeRequest&);
struct Where {
  MutableAt mutable_in;
  At in;
  std::initializer_list<int> path;
};

using R = v1::NormalizeRequest;
constexpr int kData = v1::Tensor::kDataFieldNumber;
const Where kInput{[](R* r) { return r->mutable_input(); },
                   [](const R& r) { return &r.input(); },
                   {R::kInputFieldNumber, kData}};
const Where kLayerSkip{
    [](R* r) { return r->mutable_layer_norm()->mutable_residual()->mutable_skip(); },
    [](const R& r) { return &r.layer_norm().residual().skip(); },
    {R::kLayerNormFieldNumber, v1::LayerNormParams::kResidualFieldNumber,
     v1::Residual::kSkipFieldNumber, kData}};
const Where kRmsSkip{[](R* r) { return r->mutable_rms_norm()->mutable_residual()->mutable_skip(); },
                     [](const R& r) { return &r.rms_norm().residual().skip(); },
                     {R::kRmsNormFieldNumber, v1::RmsNormParams::kResidualFieldNumber,
                      v1::Residual::kSkipFieldNumber, kData}};
const Where kQ{[](R* r) { return r->mutable_qk_norm()->mutable_q(); },
               [](const R& r) { return &r.qk_norm().q(); },
               {R::kQkNormFieldNumber, v1::QkNormParams::kQFieldNumber, kData}};
const Where kK{[](R* r) { return r->mutable_qk_norm()->mutable_k(); },
               [](const R& r) { return &r.qk_norm().k(); },
               {R::kQkNormFieldNumber, v1::QkNormParams::kKFieldNumber, kData}};

// Adds to `mask` the path of every field set in `m` (`prefix` its own path), except the
// bytes of the tensors in `rows`: of those, only the dtype.
void MaskAllBut(const google::protobuf::Message& m, const std::string& prefix,
                const std::vector<const google::protobuf::Message*>& rows,
                google::protobuf::FieldMask* mask) {
  using google::protobuf::FieldDescriptor;
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix + f->name();
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
      mask->add_paths(path);
      continue;
    }
    const google::protobuf::Message& sub = m.GetReflection()->GetMessage(m, f);
    std::vector<const FieldDescriptor*> sub_fields;
    sub.GetReflection()->ListFields(sub, &sub_fields);
    if (absl::c_linear_search(rows, &sub)) {
      mask->add_paths(path + ".dtype");
    } else if (sub_fields.empty()) {
      mask->add_paths(path);  // a present, empty message (the op with every default)
    } else {
      MaskAllBut(sub, path + ".", rows, mask);
    }
  }
}

}  // namespace

const std::string& NormalizeStreamMethod() {
  static const std::string* const method =
      new std::string(absl::StrCat("/", v1::NormService::service_full_name(), "/NormalizeStream"));
  return *method;
}

std::optional<ChunkPlan> PlanChunks(const v1::NormalizeRequest& request, int64_t threshold_bytes,
                                    int64_t chunk_bytes) {
  if (threshold_bytes <= 0 || chunk_bytes <= 0) return std::nullopt;
  // Outputs directed into shared memory are one range each, not a chunk's.
  if (request.has_output_shared_memory() || request.has_k_output_shared_memory() ||
      request.has_residual_sum_shared_memory()) {
    return std::nullopt;
  }
  std::vector<std::pair<Where, int>> tensors;  // where, rows' rank
  switch (request.op_case()) {
    case v1::NormalizeRequest::kLayerNorm: {
      const int k =
          request.layer_norm().normalized_ndim() == 0 ? 1 : request.layer_norm().normalized_ndim();
      tensors.push_back({kInput, k});
      if (request.layer_norm().has_residual()) tensors.push_back({kLayerSkip, k});
      break;
    }
    case v1::NormalizeRequest::kRmsNorm:
      tensors.push_back({kInput, 1});
      if (request.rms_norm().has_residual()) tensors.push_back({kRmsSkip, 1});
      break;
    case v1::NormalizeRequest::kL2Norm:
      tensors.push_back({kInput, 1});
      break;
    case v1::NormalizeRequest::kQkNorm:
      tensors.push_back({kQ, 2});  // [..., heads, head_dim]: a row is one head
      tensors.push_back({kK, 2});
      break;
    default:
      return std::nullopt;  // the channel ops' statistics span rows
  }
  ChunkPlan plan;
  int64_t total = 0, fewest_rows = INT64_MAX;
  for (auto& [where, k] : tensors) {
    ChunkedTensor t{where.mutable_in, where.in, {where.path.begin(), where.path.end()}};
    if (!Describe(*where.in(request), k, &t)) return std::nullopt;
    if (request.op_case() == v1::NormalizeRequest::kQkNorm) {
      t.rows *= t.row_dims[0];
      t.row_bytes /= std::max<int64_t>(t.row_dims[0], 1);
      t.row_dims.erase(t.row_dims.begin());  // QK-norm: a row is one head's head_dim
    }
    total += t.rows * t.row_bytes;
    fewest_rows = std::min(fewest_rows, t.rows);
    plan.tensors.push_back(std::move(t));
  }
  // A residual's skip must match the input, or the server rejects the whole request.
  if (plan.tensors.size() == 2 && request.op_case() != v1::NormalizeRequest::kQkNorm &&
      plan.tensors[1].shape != plan.tensors[0].shape) {
    return std::nullopt;
  }
  if (total < threshold_bytes) return std::nullopt;
  const int64_t chunks = std::min((total + chunk_bytes - 1) / chunk_bytes, fewest_rows);
  if (chunks < 2) return std::nullopt;
  plan.chunks = static_cast<int>(std::min<int64_t>(chunks, 1 << 20));
  for (ChunkedTensor& t : plan.tensors) {
    for (int i = 0; i <= plan.chunks; ++i) t.starts.push_back(t.rows * i / plan.chunks);
  }
  // The skeleton: the request without the row tensors' bytes (copied once per chunk, it
  // must stay small); every other field, present or added to the contract later, is kept.
  std::vector<const google::protobuf::Message*> rows;
  for (const ChunkedTensor& t : plan.tensors) rows.push_back(t.in(request));
  google::protobuf::FieldMask mask;
  MaskAllBut(request, "", rows, &mask);
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      request, mask, google::protobuf::util::FieldMaskUtil::MergeOptions(), &plan.skeleton);
  return plan;
}

grpc::ByteBuffer MakeChunk(const ChunkPlan& plan, int i,
                           const std::shared_ptr<const ChunkSource>& source) {
  v1::NormalizeRequest meta = plan.skeleton;
  std::vector<ChunkBytes> bytes;
  for (const ChunkedTensor& t : plan.tensors) {
    const int64_t first = t.starts[i], rows = t.starts[i + 1] - first;
    v1::Tensor* out = t.mutable_in(&meta);
    out->clear_shape();
    out->add_shape(rows);
    for (int64_t d : t.row_dims) out->add_shape(d);
    bytes.push_back({&t.path, t.in(source->whole)->data().data() + first * t.row_bytes,
                     static_cast<size_t>(rows * t.row_bytes)});
  }
  return EncodeChunk(meta, bytes, source);
}

ChunkAssembler::ChunkAssembler(const v1::NormalizeRequest& whole, const ChunkPlan& plan,
                               v1::NormalizeResponse* into)
    : plan_(plan), out_(into != nullptr ? into : &whole_) {
  // Clear() would free the output tensors with their buffers: their bytes are kept aside.
  const bool qk = plan_.skeleton.op_case() == v1::NormalizeRequest::kQkNorm;
  if (out_->has_output()) out_->mutable_output()->mutable_data()->swap(spare_[0]);
  if (qk && out_->has_k_output()) out_->mutable_k_output()->mutable_data()->swap(spare_[1]);
  if (!qk && out_->has_residual_sum()) {
    out_->mutable_residual_sum()->mutable_data()->swap(spare_[1]);
  }
  out_->Clear();
  out_->set_id(whole.id());
}

absl::Status ChunkAssembler::Add(grpc::ByteBuffer* part) {
  const bool qk = plan_.skeleton.op_case() == v1::NormalizeRequest::kQkNorm;
  // The outputs a row op makes, each with the row tensor whose rows it follows.
  const int second_field = qk ? v1::NormalizeResponse::kKOutputFieldNumber
                              : v1::NormalizeResponse::kResidualSumFieldNumber;
  auto follows = [&](int o) -> const ChunkedTensor& {
    return plan_.tensors[o == 1 && plan_.tensors.size() > 1 ? 1 : 0];
  };
  auto tensor = [&](v1::NormalizeResponse* r, int o) {
    return o == 0 ? r->mutable_output() : qk ? r->mutable_k_output() : r->mutable_residual_sum();
  };
  // A chunk's output bytes go straight into the whole answer's, each chunk's rows times
  // chunk 0's bytes per row.
  auto sink = [&](int field, size_t size) -> std::string* {
    const int o = field == v1::NormalizeResponse::kOutputFieldNumber ? 0
                  : field == second_field                            ? 1
                                                                     : -1;
    if (o < 0) return nullptr;
    const ChunkedTensor& rows = follows(o);
    std::string* to = tensor(out_, o)->mutable_data();
    if (added_ == 0) {
      if (rows.starts[1] == 0 || size % rows.starts[1] != 0) return nullptr;
      row_bytes_[o] = static_cast<int64_t>(size) / rows.starts[1];
      to->swap(spare_[o]);
      to->clear();
      to->reserve(static_cast<size_t>(row_bytes_[o] * rows.rows));
    }
    const int64_t expected = row_bytes_[o] * (rows.starts[added_ + 1] - rows.starts[added_]);
    return static_cast<int64_t>(size) == expected ? to : nullptr;
  };
  v1::NormalizeResponse meta;
  if (absl::Status s = ReadChunkAnswer(part, sink, &meta); !s.ok()) return s;
  if (meta.has_error()) return StatusFromRpc(meta.error());
  for (int o = 0; o < 2 && added_ == 0; ++o) {
    const bool present = o == 0 ? meta.has_output()
                         : qk   ? meta.has_k_output()
                                : meta.has_residual_sum();
    if (!present) continue;
    const v1::Tensor* from = tensor(&meta, o);
    v1::Tensor* to = tensor(out_, o);
    to->set_dtype(from->dtype());
    to->mutable_shape()->Assign(follows(o).shape.begin(), follows(o).shape.end());
  }
  for (int o = 0; o < 2; ++o) {  // every chunk answers the outputs the first one did
    const int64_t want = row_bytes_[o] * follows(o).starts[added_ + 1];
    const v1::Tensor& t = o == 0 ? out_->output() : qk ? out_->k_output() : out_->residual_sum();
    if (static_cast<int64_t>(t.data().size()) != want) {
      return absl::InternalError("chunked call: a chunk's answer lacks an output");
    }
  }
  if (added_ == 0) {
    out_->set_backend(meta.backend());
    *out_->mutable_timing() = meta.timing();
  } else {
    // Queue time and total: the longest chunk's; compute: the chunks' sum.
    v1::Timing* t = out_->mutable_timing();
    t->set_queue_us(std::max(t->queue_us(), meta.timing().queue_us()));
    t->set_total_us(std::max(t->total_us(), meta.timing().total_us()));
    t->set_compute_us(t->compute_us() + meta.timing().compute_us());
    t->set_batch_requests(std::max(t->batch_requests(), meta.timing().batch_requests()));
  }
  ++added_;
  return absl::OkStatus();
}

absl::Status StatusFromRpc(const google::rpc::Status& error) {
  absl::Status out(static_cast<absl::StatusCode>(error.code()), error.message());
  for (const google::protobuf::Any& detail : error.details()) {
    out.SetPayload(detail.type_url(), absl::Cord(detail.value()));
  }
  return out;
}

absl::Status StatusFromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  google::rpc::Status rich;
  if (s.error_details().empty() || !rich.ParseFromString(s.error_details())) rich.Clear();
  rich.set_code(s.error_code());
  rich.set_message(s.error_message());
  return StatusFromRpc(rich);
}

}  // namespace normd
