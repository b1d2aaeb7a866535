#include "normd/load/workload.h"

#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "normd/common/status_macros.h"
#include "normd/requests.h"

namespace normd {
namespace {

// splitmix64: a good 64-bit mix of (seed, n), cheap enough to run per request.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Random tensors of one kind, from one generator.
class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  HostTensor Normal(DType t, std::vector<int64_t> shape, float mean = 0, float stddev = 1) {
    HostTensor x(t, shape);
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(x.numel());
    for (float& f : v) f = dist(rng_);
    return HostTensor::FromFloats(t, std::move(shape), std::span<const float>(v));
  }
  HostTensor Positive(int64_t n) {  // variances
    std::uniform_real_distribution<float> dist(0.5f, 2.0f);
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng_);
    return HostTensor::FromFloats(DType::kF32, {n}, std::span<const float>(v));
  }

 private:
  std::mt19937_64 rng_;
};

absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  for (absl::string_view d : absl::StrSplit(text, 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--shape: expected sizes >= 1 joined by x (1x4096), got '", text, "'"));
    }
    shape.push_back(v);
  }
  return shape;
}

absl::StatusOr<DType> ParseDType(const std::string& v) {
  if (v == "f32") return DType::kF32;
  if (v == "f16") return DType::kF16;
  if (v == "bf16") return DType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype: expected f32, f16 or bf16, got '", v, "'"));
}

// A flag with one of `choices`; index into them.
absl::StatusOr<int> Choice(const CliFlags& f, const std::string& name,
                           std::vector<std::string> choices) {
  const std::string v = f.GetString(name, choices[0]);
  for (size_t i = 0; i < choices.size(); ++i) {
    if (v == choices[i]) return static_cast<int>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, ": expected ", absl::StrJoin(choices, ", "), ", got '", v, "'"));
}

absl::Status SetCommon(const CliFlags& f, CommonOptions* o) {
  NORMD_ASSIGN_OR_RETURN(int b, Choice(f, "backend", {"auto", "cpu", "cuda"}));
  o->backend = b == 0 ? Backend::kAuto : b == 1 ? Backend::kCpu : Backend::kCuda;
  if (auto v = f.Find("output-dtype")) {
    NORMD_ASSIGN_OR_RETURN(DType t, ParseDType(*v));
    o->output_dtype = t;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ResidualOptions>> MakeResidual(const CliFlags& f, Random& rng,
                                                            const HostTensor& x) {
  if (!f.GetBool("residual")) return std::optional<ResidualOptions>();
  ResidualOptions r;
  r.skip = rng.Normal(x.dtype, x.shape);
  NORMD_ASSIGN_OR_RETURN(r.alpha, f.GetDouble("alpha", 1.0));
  NORMD_ASSIGN_OR_RETURN(int p, Choice(f, "placement", {"add-then-norm", "norm-then-add"}));
  r.placement =
      p == 0 ? ResidualOptions::Placement::kAddThenNorm : ResidualOptions::Placement::kNormThenAdd;
  r.return_sum = f.GetBool("return-sum");
  return std::optional<ResidualOptions>(std::move(r));
}

absl::StatusOr<v1::NormalizeRequest> BuildRequest(const CliFlags& f, uint64_t seed) {
  NORMD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ParseShape(f.GetString("shape", "1x4096")));
  NORMD_ASSIGN_OR_RETURN(DType dtype, ParseDType(f.GetString("dtype", "f32")));
  NORMD_ASSIGN_OR_RETURN(std::optional<double> eps, f.FindDouble("eps"));
  NORMD_ASSIGN_OR_RETURN(int placement, Choice(f, "eps-placement", {"inside", "outside"}));
  const EpsPlacement eps_placement =
      placement == 0 ? EpsPlacement::kInsideSqrt : EpsPlacement::kOutsideSqrt;
  NORMD_ASSIGN_OR_RETURN(int layout_i, Choice(f, "layout", {"channels-first", "channels-last"}));
  const Layout layout = layout_i == 0 ? Layout::kChannelsFirst : Layout::kChannelsLast;
  Random rng(seed);
  const HostTensor x = rng.Normal(dtype, shape);
  const int64_t cols = shape.back();
  const int64_t channels = shape.size() < 2                   ? 0
                           : layout == Layout::kChannelsFirst ? shape[1]
                                                              : shape.back();
  const bool weight = f.GetBool("weight"), bias = f.GetBool("bias");
  const std::string op = f.GetString("op", "rms-norm");
  if (op == "layer-norm") {
    LayerNormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    NORMD_ASSIGN_OR_RETURN(int64_t k, f.GetInt("normalized-ndim", 1));
    if (k < 1 || k > static_cast<int64_t>(shape.size())) {
      return absl::InvalidArgumentError("--normalized-ndim: expected 1 to the shape's rank");
    }
    o.normalized_ndim = static_cast<int>(k);
    std::vector<int64_t> normalized(shape.end() - k, shape.end());
    if (weight) o.weight = rng.Normal(DType::kF32, normalized, 1, 0.1f);
    if (bias) o.bias = rng.Normal(DType::kF32, normalized, 0, 0.1f);
    o.eps = eps;
    o.eps_placement = eps_placement;
    NORMD_ASSIGN_OR_RETURN(o.residual, MakeResidual(f, rng, x));
    return MakeRequest(x, o);
  }
  if (op == "rms-norm") {
    RmsNormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    if (weight) o.weight = rng.Normal(DType::kF32, {cols}, 1, 0.1f);
    o.eps = eps;
    o.eps_placement = eps_placement;
    NORMD_ASSIGN_OR_RETURN(o.weight_offset, f.GetDouble("weight-offset", 0));
    NORMD_ASSIGN_OR_RETURN(o.partial_fraction, f.FindDouble("partial-fraction"));
    o.cast_before_weight = f.GetBool("cast-before-weight");
    NORMD_ASSIGN_OR_RETURN(o.residual, MakeResidual(f, rng, x));
    return MakeRequest(x, o);
  }
  if (op == "l2-norm") {
    L2NormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    o.eps = eps;
    return MakeRequest(x, o);
  }
  if (op == "qk-norm") {
    QkNormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    NORMD_ASSIGN_OR_RETURN(int kind, Choice(f, "kind", {"rms", "layer", "l2"}));
    o.kind = kind == 0   ? QkNormOptions::Kind::kRms
             : kind == 1 ? QkNormOptions::Kind::kLayer
                         : QkNormOptions::Kind::kL2;
    if (weight) {
      o.q_weight = rng.Normal(DType::kF32, {cols}, 1, 0.1f);
      o.k_weight = rng.Normal(DType::kF32, {cols}, 1, 0.1f);
    }
    o.eps = eps;
    const HostTensor k = rng.Normal(dtype, shape);
    return MakeRequest(x, k, o);
  }
  if (op == "batch-norm" || op == "group-norm" || op == "instance-norm") {
    if (shape.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat("--shape: ", op, " needs [N, C, ...]"));
    }
  }
  // A channel op's per-channel affine parameters and running statistics.
  const auto channel_params = [&](auto* o) {
    if (weight) o->weight = rng.Normal(DType::kF32, {channels}, 1, 0.1f);
    if (bias) o->bias = rng.Normal(DType::kF32, {channels}, 0, 0.1f);
  };
  const auto running_stats = [&](auto* o) {
    o->running_mean = rng.Normal(DType::kF32, {channels}, 0, 0.1f);
    o->running_var = rng.Positive(channels);
  };
  if (op == "batch-norm") {
    BatchNormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    o.layout = layout;
    o.training = f.GetBool("training");
    channel_params(&o);
    // Inference needs the running statistics; training updates them when given.
    if (!o.training || f.GetBool("running-stats")) running_stats(&o);
    NORMD_ASSIGN_OR_RETURN(o.momentum, f.FindDouble("momentum"));
    o.eps = eps;
    return MakeRequest(x, o);
  }
  if (op == "group-norm") {
    GroupNormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    o.layout = layout;
    NORMD_ASSIGN_OR_RETURN(int64_t groups, f.GetInt("groups", 1));
    if (groups < 1 || channels % groups != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--groups: expected a divisor of the ",
                                                     channels, " channels, got ", groups));
    }
    o.num_groups = static_cast<int>(groups);
    channel_params(&o);
    o.eps = eps;
    return MakeRequest(x, o);
  }
  if (op == "instance-norm") {
    InstanceNormOptions o;
    NORMD_RETURN_IF_ERROR(SetCommon(f, &o));
    o.layout = layout;
    o.use_running_stats = f.GetBool("use-running-stats");
    channel_params(&o);
    if (o.use_running_stats) running_stats(&o);
    o.eps = eps;
    return MakeRequest(x, o);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--op: expected layer-norm, rms-norm, l2-norm, qk-norm, batch-norm, group-norm or "
      "instance-norm, got '",
      op, "'"));
}

}  // namespace

const std::map<std::string, bool>& Workload::Flags() {
  static const auto* flags = new std::map<std::string, bool>{{"op", false},
                                                             {"shape", false},
                                                             {"dtype", false},
                                                             {"backend", false},
                                                             {"output-dtype", false},
                                                             {"weight", true},
                                                             {"bias", true},
                                                             {"residual", true},
                                                             {"alpha", false},
                                                             {"placement", false},
                                                             {"return-sum", true},
                                                             {"eps", false},
                                                             {"eps-placement", false},
                                                             {"normalized-ndim", false},
                                                             {"weight-offset", false},
                                                             {"partial-fraction", false},
                                                             {"cast-before-weight", true},
                                                             {"kind", false},
                                                             {"training", true},
                                                             {"running-stats", true},
                                                             {"momentum", false},
                                                             {"groups", false},
                                                             {"layout", false},
                                                             {"use-running-stats", true}};
  return *flags;
}

const char* Workload::FlagUsage() {
  return R"(workload (one kind; random inputs from --seed):
  --op layer-norm|rms-norm|l2-norm|qk-norm|batch-norm|group-norm|instance-norm (rms-norm)
  --shape 1x4096 (qk-norm: q and k each; channel ops: N x C x ... or N x ... x C)
  --dtype f32|f16|bf16   --output-dtype f32|f16|bf16   --backend auto|cpu|cuda
  --weight --bias        random affine parameters (f32)
  --residual [--alpha A] [--placement add-then-norm|norm-then-add] [--return-sum]
  --eps E --eps-placement inside|outside --normalized-ndim K (layer-norm)
  --weight-offset W --partial-fraction P --cast-before-weight (rms-norm)
  --kind rms|layer|l2 (qk-norm)   --groups G (group-norm)
  --layout channels-first|channels-last   --training [--running-stats] [--momentum M]
  --use-running-stats (instance-norm)
  --mix FILE   weighted kinds, one a line: WEIGHT OP SHAPE DTYPE [flags above]
)";
}

absl::StatusOr<Workload> Workload::FromFlags(const CliFlags& flags, uint64_t seed) {
  NORMD_ASSIGN_OR_RETURN(v1::NormalizeRequest request, BuildRequest(flags, seed));
  Workload w;
  w.seed_ = seed;
  std::vector<std::string> label = {flags.GetString("op", "rms-norm"),
                                    flags.GetString("shape", "1x4096"),
                                    flags.GetString("dtype", "f32")};
  for (const auto& [name, boolean] : Flags()) {
    if (name == "op" || name == "shape" || name == "dtype" || !flags.Has(name)) continue;
    label.push_back(boolean ? absl::StrCat("--", name)
                            : absl::StrCat("--", name, " ", flags.GetString(name)));
  }
  w.Add(absl::StrJoin(label, " "), 1, std::move(request));
  return w;
}

Workload Workload::Of(const v1::NormalizeRequest& request) {
  Workload w;
  w.Add("request", 1, request);
  return w;
}

absl::StatusOr<Workload> Workload::FromMix(const std::string& text, uint64_t seed) {
  Workload w;
  w.seed_ = seed;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<std::string> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--mix line ", line_no, ": ", why));
    };
    double weight;
    if (words.size() < 4 || !absl::SimpleAtod(words[0], &weight) || !(weight > 0)) {
      return bad("expected WEIGHT OP SHAPE DTYPE [flags], the weight > 0");
    }
    std::vector<std::string> args = {"normbench", "--op",    words[1], "--shape",
                                     words[2],    "--dtype", words[3]};
    args.insert(args.end(), words.begin() + 4, words.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    CliFlags flags(Flags());
    if (absl::Status s = flags.Parse(static_cast<int>(argv.size()), argv.data()); !s.ok()) {
      return bad(s.message());
    }
    if (!flags.positional().empty())
      return bad(absl::StrCat("unexpected '", flags.positional()[0], "'"));
    absl::StatusOr<Workload> one = FromFlags(flags, Mix(seed ^ static_cast<uint64_t>(line_no)));
    if (!one.ok()) return bad(one.status().message());
    WorkItem& item = one->items_[0];
    w.Add(std::move(item.label), weight, std::move(item.request));
  }
  if (w.items_.empty()) return absl::InvalidArgumentError("--mix: no request kinds in the file");
  return w;
}

void Workload::Add(std::string label, double weight, v1::NormalizeRequest request) {
  WorkItem item;
  item.label = std::move(label);
  item.weight = weight;
  item.request_bytes = static_cast<int64_t>(request.ByteSizeLong());
  item.request = std::move(request);
  items_.push_back(std::move(item));
  cumulative_.push_back((cumulative_.empty() ? 0 : cumulative_.back()) + weight);
}

absl::Status Workload::MoveToSharedMemory(Client& client) {
  for (size_t i = 0; i < items_.size(); ++i) {
    WorkItem& item = items_[i];
    absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(
        absl::StrCat("normbench-", getpid(), "-", i),
        static_cast<size_t>(std::max<int64_t>(SharedMemoryBytes(item.request), 1)));
    if (!region.ok()) return region.status();
    auto held = std::make_shared<SharedMemoryRegion>(*std::move(region));
    if (absl::Status s = client.RegisterSharedMemory(*held); !s.ok()) return s;
    if (absl::Status s = PlaceRequest(&item.request, *held); !s.ok()) return s;
    item.request_bytes = static_cast<int64_t>(item.request.ByteSizeLong());
    item.region = held;
    regions_.push_back(std::move(held));
  }
  return absl::OkStatus();
}

absl::Status Workload::ComputeReferences() {
  for (WorkItem& item : items_) {
    absl::StatusOr<Reference> r = ComputeReference(item.request);
    if (!r.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(item.label, ": ", r.status().message()));
    }
    item.reference = std::make_shared<const Reference>(*std::move(r));
  }
  return absl::OkStatus();
}

const WorkItem& Workload::Pick(uint64_t n) const {
  if (items_.size() == 1) return items_[0];
  const double u = static_cast<double>(Mix(seed_ * 0x100000001b3ULL + n) >> 11) * 0x1p-53;
  const double target = u * cumulative_.back();
  const size_t i =
      std::upper_bound(cumulative_.begin(), cumulative_.end(), target) - cumulative_.begin();
  return items_[std::min(i, items_.size() - 1)];
}

}  // namespace normd
