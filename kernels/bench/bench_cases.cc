#include "kernels/bench/bench_cases.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/bench/bench_inputs.h"
#include "normd/kernels/reference.h"

namespace normd::kernels::bench {
namespace {

// A typed buffer filled with N(0.5, 2) values (rounded to its dtype), starting `offset`
// bytes past a page (AllocatePageAligned: every case's buffers lie alike).
struct Buf {
  PageBytes bytes;
  unsigned char* data;
  DType dtype;
  int64_t n;
  Buf(DType t, int64_t count, uint64_t seed, int64_t offset) : dtype(t), n(count) {
    bytes = AllocatePageAligned(static_cast<size_t>(n * ElementSize(t) + offset));
    data = bytes.get() + offset;
    FillNormal(t, data, n, static_cast<uint32_t>(seed));
  }
  ConstTensor view() const { return {dtype, data, n}; }
  MutTensor mut() { return {dtype, data, n}; }
};

const DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::string Lower(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(c));
  return out;
}

// Row-wise ops: the op's options applied to a rows x cols problem.
void AddRowCases(int64_t offset, bool typed_params, std::vector<BenchCase>* out) {
  struct Op {
    const char* name;
    RowNormKind kind;
    bool weight, bias;
    ResidualPlacement residual = ResidualPlacement::kNone;
    double weight_offset = 0, partial_fraction = 1;
    bool cast_before_weight = false;
  };
  using R = ResidualPlacement;
  const Op ops[] = {
      {"layer_norm", RowNormKind::kLayer, true, true},
      {"rms_norm", RowNormKind::kRms, true, false},
      {"rms_norm_gemma", RowNormKind::kRms, true, false, R::kNone, 1.0},  // (1 + w)
      {"rms_norm_partial", RowNormKind::kRms, true, false, R::kNone, 0, 0.25},
      {"rms_norm_hf", RowNormKind::kRms, true, false, R::kNone, 0, 1, true},
      {"l2_norm", RowNormKind::kL2, false, false},
      {"fused_add_rms_norm", RowNormKind::kRms, true, false, R::kAddThenNorm},
      {"fused_add_layer_norm", RowNormKind::kLayer, true, true, R::kAddThenNorm},
      {"layer_norm_then_add", RowNormKind::kLayer, true, true, R::kNormThenAdd},
  };
  const std::pair<int64_t, int64_t> shapes[] = {{1, 4096},    {8, 4096},     {64, 4096},
                                                {4096, 4096}, {16384, 1024}, {1024, 65536}};
  for (const Op& op : ops) {
    for (DType t : kDtypes) {
      for (const auto& shape : shapes) {
        // Named copies: clang 14 cannot capture structured bindings in the lambdas below.
        const int64_t rows = shape.first, cols = shape.second;
        struct State {
          std::unique_ptr<Buf> x, skip, y, h, w, b;
          RowNormArgs a;
        };
        auto st = std::make_shared<State>();
        BenchCase c;
        c.op = op.name;
        c.dtype = Lower(DTypeName(t));
        c.shape = absl::StrCat(rows, "x", cols);
        const int64_t n = rows * cols;
        // x and y; plus skip and h (ADD_THEN_NORM), or skip (NORM_THEN_ADD).
        const int streams =
            op.residual == R::kAddThenNorm ? 4 : (op.residual == R::kNormThenAdd ? 3 : 2);
        c.bytes = n * ElementSize(t) * streams;
        c.setup = [=] {
          st->x = std::make_unique<Buf>(t, n, 1, offset);
          st->y = std::make_unique<Buf>(t, n, 2, offset);
          const DType pt = typed_params ? t : DType::kF32;
          st->w = std::make_unique<Buf>(pt, cols, 3, offset);
          st->b = std::make_unique<Buf>(pt, cols, 4, offset);
          RowNormArgs& a = st->a;
          a = RowNormArgs{};
          a.kind = op.kind;
          a.rows = rows;
          a.cols = cols;
          a.x = st->x->view();
          a.y = st->y->mut();
          a.eps = 1e-5;
          if (op.weight) a.weight = st->w->view();
          if (op.bias) a.bias = st->b->view();
          a.weight_offset = op.weight_offset;
          a.partial_fraction = op.partial_fraction;
          a.cast_before_weight = op.cast_before_weight;
          if (op.residual != R::kNone) {
            st->skip = std::make_unique<Buf>(t, n, 5, offset);
            a.residual = op.residual;
            a.skip = st->skip->view();
          }
          if (op.residual == R::kAddThenNorm) {
            st->h = std::make_unique<Buf>(t, n, 6, offset);
            a.h = st->h->mut();
          }
        };
        c.teardown = [=] { *st = State{}; };
        c.run = [=](CpuBackend& cpu, int threads) { (void)cpu.RowNorm(st->a, threads); };
        c.reference = [=] { (void)reference::RowNorm(st->a); };
        c.calls = [=] { return BenchCase::Calls{{st->a}}; };
        out->push_back(std::move(c));
      }
    }
  }
  // QK-norm: q and k of 4096 tokens x 32 heads x 128, RMS per head with weights.
  for (DType t : kDtypes) {
    struct State {
      std::unique_ptr<Buf> q, k, qo, ko, w;
      RowNormArgs aq, ak;
    };
    auto st = std::make_shared<State>();
    const int64_t rows = 4096 * 32, cols = 128, n = rows * cols;
    BenchCase c;
    c.op = "qk_norm";
    c.dtype = Lower(DTypeName(t));
    c.shape = "4096x32x128";
    c.bytes = 2 * n * ElementSize(t) * 2;
    c.setup = [=] {
      st->q = std::make_unique<Buf>(t, n, 1, offset);
      st->k = std::make_unique<Buf>(t, n, 2, offset);
      st->qo = std::make_unique<Buf>(t, n, 3, offset);
      st->ko = std::make_unique<Buf>(t, n, 4, offset);
      st->w = std::make_unique<Buf>(typed_params ? t : DType::kF32, cols, 5, offset);
      for (auto [a, in, o] : {std::tuple{&st->aq, st->q.get(), st->qo.get()},
                              std::tuple{&st->ak, st->k.get(), st->ko.get()}}) {
        *a = RowNormArgs{};
        a->kind = RowNormKind::kRms;
        a->rows = rows;
        a->cols = cols;
        a->x = in->view();
        a->y = o->mut();
        a->weight = st->w->view();
      }
    };
    c.teardown = [=] { *st = State{}; };
    c.run = [=](CpuBackend& cpu, int threads) {
      (void)cpu.RowNorm(st->aq, threads);
      (void)cpu.RowNorm(st->ak, threads);
    };
    c.reference = [=] {
      (void)reference::RowNorm(st->aq);
      (void)reference::RowNorm(st->ak);
    };
    c.calls = [=] { return BenchCase::Calls{{st->aq, st->ak}}; };
    out->push_back(std::move(c));
  }
}

// BatchNorm (training and inference), GroupNorm (32 groups), InstanceNorm on
// [32, 64, 56, 56] and its channels-last twin [32, 56, 56, 64].
void AddChannelCases(int64_t offset, std::vector<BenchCase>* out) {
  const int64_t N = 32, C = 64, S = 56 * 56, total = N * C * S;
  const int64_t l2 = 2 << 20;
  for (const char* op : {"batch_norm_train", "batch_norm_eval", "group_norm", "instance_norm"}) {
    for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
      for (DType t : kDtypes) {
        struct State {
          std::unique_ptr<Buf> x, y, w, b, rm, rv, rm_out, rv_out, mean, var;
          BatchNormArgs bn;
          GroupNormArgs gn;
        };
        auto st = std::make_shared<State>();
        const std::string opn = op;
        const bool cf = layout == Layout::kChannelsFirst;
        BenchCase c;
        c.op = opn;
        c.dtype = Lower(DTypeName(t));
        c.shape = cf ? "32x64x56x56" : "32x56x56x64";
        // Statistics then output: x is read twice from memory unless the unit of work
        // (a channel across the batch for BatchNorm, a sample for Group/InstanceNorm in
        // channels-last, a group or instance otherwise) fits in L2.
        int64_t unit_bytes = 0;
        if (opn == "batch_norm_train")
          unit_bytes = cf ? N * S * ElementSize(t) : total * ElementSize(t);
        if (opn == "group_norm") unit_bytes = (cf ? (C / 32) * S : C * S) * ElementSize(t);
        if (opn == "instance_norm") unit_bytes = (cf ? S : C * S) * ElementSize(t);
        const int reads = unit_bytes > l2 ? 2 : 1;
        c.bytes = total * ElementSize(t) * (reads + 1);
        c.setup = [=] {
          st->x = std::make_unique<Buf>(t, total, 1, offset);
          st->y = std::make_unique<Buf>(t, total, 2, offset);
          st->w = std::make_unique<Buf>(DType::kF32, C, 3, offset);
          st->b = std::make_unique<Buf>(DType::kF32, C, 4, offset);
          st->rm = std::make_unique<Buf>(DType::kF32, C, 5, offset);
          st->rv = std::make_unique<Buf>(DType::kF32, C, 6, offset);
          for (int64_t i = 0; i < C; ++i) StoreElement(DType::kF32, st->rv->data, i, 1.5f);
          st->rm_out = std::make_unique<Buf>(DType::kF32, C, 7, offset);
          st->rv_out = std::make_unique<Buf>(DType::kF32, C, 8, offset);
          st->mean = std::make_unique<Buf>(DType::kF32, C, 9, offset);
          st->var = std::make_unique<Buf>(DType::kF32, C, 10, offset);
          BatchNormArgs& bn = st->bn;
          bn = BatchNormArgs{};
          bn.n = N;
          bn.c = C;
          bn.s = S;
          bn.layout = layout;
          bn.x = st->x->view();
          bn.y = st->y->mut();
          bn.weight = st->w->view();
          bn.bias = st->b->view();
          bn.running_mean = st->rm->view();
          bn.running_var = st->rv->view();
          bn.training = opn == "batch_norm_train";
          if (bn.training) {
            bn.batch_mean = st->mean->mut();
            bn.batch_var = st->var->mut();
            bn.running_mean_out = st->rm_out->mut();
            bn.running_var_out = st->rv_out->mut();
          }
          GroupNormArgs& gn = st->gn;
          gn = GroupNormArgs{};
          gn.n = N;
          gn.c = C;
          gn.s = S;
          gn.groups = opn == "group_norm" ? 32 : C;
          gn.layout = layout;
          gn.x = st->x->view();
          gn.y = st->y->mut();
          gn.weight = st->w->view();
          gn.bias = st->b->view();
        };
        c.teardown = [=] { *st = State{}; };
        const bool batch = opn.rfind("batch_norm", 0) == 0;
        c.run = [=](CpuBackend& cpu, int threads) {
          (void)(batch ? cpu.BatchNorm(st->bn, threads) : cpu.GroupNorm(st->gn, threads));
        };
        c.calls = [=] {
          BenchCase::Calls calls;
          if (batch) {
            calls.batch_norm = &st->bn;
          } else {
            calls.group_norm = &st->gn;
          }
          return calls;
        };
        c.reference = [=] {
          if (batch) {
            (void)reference::BatchNorm(st->bn);
          } else {
            (void)reference::GroupNorm(st->gn);
          }
        };
        out->push_back(std::move(c));
      }
    }
  }
}

}  // namespace

std::vector<BenchCase> AllCases(int64_t offset, bool typed_params) {
  std::vector<BenchCase> cases;
  AddRowCases(offset, typed_params, &cases);
  AddChannelCases(offset, &cases);
  return cases;
}

}  // namespace normd::kernels::bench
