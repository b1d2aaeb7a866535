// normctl: run one normd op on .npy files from the command line.
//   normctl [--target HOST:PORT] [--backend auto|cpu|cuda] [--timeout-ms N] OP [flags]
// Errors print the gRPC code name and message on stderr and exit 1 (2 for usage).
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "credential_flags.h"
#include "normd/client.h"
#include "normd/common/cli_flags.h"
#include "normd/common/status_macros.h"
#include "normd/shared_memory.h"
#include "npy.h"

namespace normd {
namespace {

constexpr char kUsage[] =
    R"(usage: normctl [--target HOST:PORT] [--backend auto|cpu|cuda] [--timeout-ms N] OP [flags]
OP: layer-norm rms-norm l2-norm batch-norm group-norm instance-norm qk-norm info deepnorm health
tensors (.npy): --input --output --weight --bias --running-mean --running-var --skip --sum-out
                --q --k --q-weight --k-weight --q-out --k-out --stats-out PREFIX
parameters:     --eps --normalized-ndim --eps-placement inside|outside --weight-offset
                --partial-fraction --cast-before-weight --training --momentum
                --layout channels-first|channels-last --groups --alpha
                --placement add-then-norm|norm-then-add --kind rms|layer|l2 --use-running-stats
                --dtype f32|f16|bf16 (wire dtype; default: the .npy's)
deepnorm:       --arch encoder|decoder|encoder-decoder --encoder-layers N --decoder-layers M
health:         [--service NAME] (grpc.health.v1; exit 0 when SERVING, 1 otherwise)
--shm:          tensors through a POSIX shared-memory region instead of the wire (normd on
                this host; it registers the region for the call and unregisters it after)
)";

const std::map<std::string, bool> kFlags = {{"target", false},
                                            {"service", false},
                                            {"backend", false},
                                            {"timeout-ms", false},
                                            {"input", false},
                                            {"output", false},
                                            {"weight", false},
                                            {"bias", false},
                                            {"running-mean", false},
                                            {"running-var", false},
                                            {"skip", false},
                                            {"sum-out", false},
                                            {"q", false},
                                            {"k", false},
                                            {"q-weight", false},
                                            {"k-weight", false},
                                            {"q-out", false},
                                            {"k-out", false},
                                            {"stats-out", false},
                                            {"eps", false},
                                            {"normalized-ndim", false},
                                            {"eps-placement", false},
                                            {"weight-offset", false},
                                            {"partial-fraction", false},
                                            {"cast-before-weight", true},
                                            {"training", true},
                                            {"momentum", false},
                                            {"layout", false},
                                            {"groups", false},
                                            {"alpha", false},
                                            {"placement", false},
                                            {"kind", false},
                                            {"use-running-stats", true},
                                            {"dtype", false},
                                            {"arch", false},
                                            {"encoder-layers", false},
                                            {"decoder-layers", false},
                                            {"shm", true},
                                            {"help", true}};

class Ctl {
 public:
  explicit Ctl(const CliFlags& f) : f_(f) {}

  absl::Status Run(const std::string& op);

 private:
  absl::StatusOr<std::optional<DType>> WireDType() const {
    const auto v = f_.Find("dtype");
    if (!v) return std::optional<DType>();
    if (*v == "f32") return std::optional<DType>(DType::kF32);
    if (*v == "f16") return std::optional<DType>(DType::kF16);
    if (*v == "bf16") return std::optional<DType>(DType::kBF16);
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: expected f32, f16 or bf16, got '", *v, "'"));
  }
  // An input tensor (x, skip, q, k): converted to --dtype when given.
  absl::StatusOr<std::optional<HostTensor>> Data(const std::string& flag) const {
    const auto path = f_.Find(flag);
    if (!path) return std::optional<HostTensor>();
    NORMD_ASSIGN_OR_RETURN(auto t, ReadNpy(*path));
    NORMD_ASSIGN_OR_RETURN(auto dtype, WireDType());
    if (dtype && *dtype != t.dtype) t = HostTensor::FromFloats(*dtype, t.shape, t.ToFloats());
    return std::optional<HostTensor>(std::move(t));
  }
  absl::StatusOr<HostTensor> Required(const std::string& flag) const {
    NORMD_ASSIGN_OR_RETURN(auto t, Data(flag));
    if (!t) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
    return std::move(*t);
  }
  // A parameter tensor: sent as F32 unless it already has the wire dtype (both allowed).
  absl::StatusOr<std::optional<HostTensor>> Param(const std::string& flag) const {
    const auto path = f_.Find(flag);
    if (!path) return std::optional<HostTensor>();
    NORMD_ASSIGN_OR_RETURN(auto t, ReadNpy(*path));
    NORMD_ASSIGN_OR_RETURN(auto dtype, WireDType());
    if (dtype && *dtype != t.dtype && t.dtype != DType::kF32) {
      t = HostTensor::FromFloats(DType::kF32, t.shape, t.ToFloats());
    }
    return std::optional<HostTensor>(std::move(t));
  }
  absl::StatusOr<EpsPlacement> Placement() const {
    const std::string v = f_.GetString("eps-placement", "inside");
    if (v == "inside") return EpsPlacement::kInsideSqrt;
    if (v == "outside") return EpsPlacement::kOutsideSqrt;
    return absl::InvalidArgumentError(
        absl::StrCat("--eps-placement: expected inside or outside, got '", v, "'"));
  }
  absl::StatusOr<Layout> GetLayout() const {
    const std::string v = f_.GetString("layout", "channels-first");
    if (v == "channels-first") return Layout::kChannelsFirst;
    if (v == "channels-last") return Layout::kChannelsLast;
    return absl::InvalidArgumentError(
        absl::StrCat("--layout: expected channels-first or channels-last, got '", v, "'"));
  }
  absl::StatusOr<std::optional<ResidualOptions>> Residual() const {
    NORMD_ASSIGN_OR_RETURN(auto skip, Data("skip"));
    if (!skip) return std::optional<ResidualOptions>();
    ResidualOptions r;
    r.skip = std::move(*skip);
    NORMD_ASSIGN_OR_RETURN(auto alpha, f_.GetDouble("alpha", 1.0));
    r.alpha = alpha;
    const std::string p = f_.GetString("placement", "add-then-norm");
    if (p == "add-then-norm") {
      r.placement = ResidualOptions::Placement::kAddThenNorm;
    } else if (p == "norm-then-add") {
      r.placement = ResidualOptions::Placement::kNormThenAdd;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--placement: expected add-then-norm or norm-then-add, got '", p, "'"));
    }
    r.return_sum = f_.Has("sum-out");
    return std::optional<ResidualOptions>(std::move(r));
  }
  absl::Status Common(CommonOptions* o) const {
    const std::string b = f_.GetString("backend", "auto");
    if (b == "auto")
      o->backend = Backend::kAuto;
    else if (b == "cpu")
      o->backend = Backend::kCpu;
    else if (b == "cuda")
      o->backend = Backend::kCuda;
    else
      return absl::InvalidArgumentError(
          absl::StrCat("--backend: expected auto, cpu or cuda, got '", b, "'"));
    return absl::OkStatus();
  }
  absl::Status Write(const std::string& flag, const std::optional<HostTensor>& t) const {
    const auto path = f_.Find(flag);
    if (!path || !t) return absl::OkStatus();
    return WriteNpy(*path, *t);
  }
  absl::Status WriteResult(const NormResult& r) const {
    NORMD_RETURN_IF_ERROR(Write("output", r.output));
    NORMD_RETURN_IF_ERROR(Write("sum-out", r.residual_sum));
    if (const auto prefix = f_.Find("stats-out")) {
      for (const auto& [suffix, t] : {std::pair{".mean.npy", &r.batch_mean},
                                      {".var.npy", &r.batch_var},
                                      {".running_mean.npy", &r.running_mean},
                                      {".running_var.npy", &r.running_var}}) {
        if (*t) NORMD_RETURN_IF_ERROR(WriteNpy(*prefix + suffix, **t));
      }
    }
    if (!f_.Has("output")) std::cerr << "normctl: no --output given; result not written\n";
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<double>> Eps() const { return f_.FindDouble("eps"); }

  // The op's call: its tensors on the wire, or with --shm in a shared-memory region made
  // for this call, registered with the server and read back from there.
  absl::StatusOr<NormResult> Call(v1::NormalizeRequest request) {
    if (!f_.GetBool("shm")) {
      NORMD_ASSIGN_OR_RETURN(v1::NormalizeResponse r, client_->Normalize(request));
      return ToNormResult(std::move(r));
    }
    NORMD_ASSIGN_OR_RETURN(
        SharedMemoryRegion region,
        SharedMemoryRegion::Create("normctl", std::max<int64_t>(SharedMemoryBytes(request), 1)));
    NORMD_RETURN_IF_ERROR(client_->RegisterSharedMemory(region));
    NORMD_RETURN_IF_ERROR(PlaceRequest(&request, region));
    absl::StatusOr<v1::NormalizeResponse> r = client_->Normalize(request);
    absl::Status unregistered = client_->UnregisterSharedMemory(region.name());
    if (!r.ok()) return r.status();
    NORMD_RETURN_IF_ERROR(unregistered);
    NORMD_RETURN_IF_ERROR(FetchResponse(&*r, region));
    return ToNormResult(*std::move(r));
  }

  absl::Status Connect() {
    ClientOptions options;
    NORMD_ASSIGN_OR_RETURN(auto ms, f_.GetInt("timeout-ms", 30000));
    options.timeout = absl::Milliseconds(ms);
    ApplyCredentialFlags(f_, &options);
    NORMD_ASSIGN_OR_RETURN(auto c,
                           Client::Create(f_.GetString("target", "localhost:50051"), options));
    client_ = std::move(c);
    return absl::OkStatus();
  }

  const CliFlags& f_;
  std::unique_ptr<Client> client_;
};

absl::Status Ctl::Run(const std::string& op) {
  NORMD_RETURN_IF_ERROR(Connect());
  if (op == "health") {  // the container's HEALTHCHECK
    const std::string service = f_.GetString("service", "");
    NORMD_ASSIGN_OR_RETURN(bool serving, client_->CheckHealth(service));
    std::cout << (service.empty() ? "normd" : service) << ": "
              << (serving ? "SERVING" : "NOT_SERVING") << "\n";
    return serving ? absl::OkStatus()
                   : absl::UnavailableError(absl::StrCat(service, " is not serving"));
  }
  if (op == "info") {
    NORMD_ASSIGN_OR_RETURN(auto info, client_->GetServerInfo());
    std::cout << info.DebugString();
    return absl::OkStatus();
  }
  if (op == "deepnorm") {
    const std::string arch = f_.GetString("arch", "");
    const v1::Architecture a = arch == "encoder"           ? v1::ARCHITECTURE_ENCODER
                               : arch == "decoder"         ? v1::ARCHITECTURE_DECODER
                               : arch == "encoder-decoder" ? v1::ARCHITECTURE_ENCODER_DECODER
                                                           : v1::ARCHITECTURE_UNSPECIFIED;
    if (a == v1::ARCHITECTURE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arch: expected encoder, decoder or encoder-decoder, got '", arch, "'"));
    }
    NORMD_ASSIGN_OR_RETURN(auto n, f_.GetInt("encoder-layers", 0));
    NORMD_ASSIGN_OR_RETURN(auto m, f_.GetInt("decoder-layers", 0));
    NORMD_ASSIGN_OR_RETURN(
        auto c, client_->GetDeepNormCoefficients(a, static_cast<int>(n), static_cast<int>(m)));
    if (c.has_encoder_alpha())
      std::printf("encoder alpha = %.9g\nencoder beta = %.9g\n", c.encoder_alpha(),
                  c.encoder_beta());
    if (c.has_decoder_alpha())
      std::printf("decoder alpha = %.9g\ndecoder beta = %.9g\n", c.decoder_alpha(),
                  c.decoder_beta());
    return absl::OkStatus();
  }
  NORMD_ASSIGN_OR_RETURN(auto eps, Eps());
  if (op == "layer-norm" || op == "rms-norm" || op == "l2-norm") {
    NORMD_ASSIGN_OR_RETURN(auto x, Required("input"));
    NORMD_ASSIGN_OR_RETURN(auto weight, Param("weight"));
    NORMD_ASSIGN_OR_RETURN(auto residual, Residual());
    absl::StatusOr<NormResult> r;
    if (op == "layer-norm") {
      LayerNormOptions o;
      NORMD_RETURN_IF_ERROR(Common(&o));
      NORMD_ASSIGN_OR_RETURN(auto k, f_.GetInt("normalized-ndim", 1));
      NORMD_ASSIGN_OR_RETURN(auto bias, Param("bias"));
      NORMD_ASSIGN_OR_RETURN(auto placement, Placement());
      o.normalized_ndim = static_cast<int>(k);
      o.weight = weight;
      o.bias = bias;
      o.eps = eps;
      o.eps_placement = placement;
      o.residual = residual;
      r = Call(MakeRequest(x, o));
    } else if (op == "rms-norm") {
      RmsNormOptions o;
      NORMD_RETURN_IF_ERROR(Common(&o));
      NORMD_ASSIGN_OR_RETURN(auto offset, f_.GetDouble("weight-offset", 0.0));
      NORMD_ASSIGN_OR_RETURN(auto partial, f_.FindDouble("partial-fraction"));
      NORMD_ASSIGN_OR_RETURN(auto placement, Placement());
      o.weight = weight;
      o.eps = eps;
      o.weight_offset = offset;
      o.partial_fraction = partial;
      o.eps_placement = placement;
      o.cast_before_weight = f_.GetBool("cast-before-weight");
      o.residual = residual;
      r = Call(MakeRequest(x, o));
    } else {
      L2NormOptions o;
      NORMD_RETURN_IF_ERROR(Common(&o));
      o.eps = eps;
      r = Call(MakeRequest(x, o));
    }
    if (!r.ok()) return r.status();
    return WriteResult(*r);
  }
  if (op == "batch-norm" || op == "group-norm" || op == "instance-norm") {
    NORMD_ASSIGN_OR_RETURN(auto x, Required("input"));
    NORMD_ASSIGN_OR_RETURN(auto weight, Param("weight"));
    NORMD_ASSIGN_OR_RETURN(auto bias, Param("bias"));
    NORMD_ASSIGN_OR_RETURN(auto rm, Param("running-mean"));
    NORMD_ASSIGN_OR_RETURN(auto rv, Param("running-var"));
    NORMD_ASSIGN_OR_RETURN(auto layout, GetLayout());
    absl::StatusOr<NormResult> r;
    if (op == "batch-norm") {
      BatchNormOptions o;
      NORMD_RETURN_IF_ERROR(Common(&o));
      NORMD_ASSIGN_OR_RETURN(auto momentum, f_.FindDouble("momentum"));
      o.weight = weight;
      o.bias = bias;
      o.running_mean = rm;
      o.running_var = rv;
      o.training = f_.GetBool("training");
      o.momentum = momentum;
      o.eps = eps;
      o.layout = layout;
      r = Call(MakeRequest(x, o));
    } else if (op == "group-norm") {
      GroupNormOptions o;
      NORMD_RETURN_IF_ERROR(Common(&o));
      NORMD_ASSIGN_OR_RETURN(auto groups, f_.GetInt("groups", 1));
      o.num_groups = static_cast<int>(groups);
      o.weight = weight;
      o.bias = bias;
      o.eps = eps;
      o.layout = layout;
      r = Call(MakeRequest(x, o));
    } else {
      InstanceNormOptions o;
      NORMD_RETURN_IF_ERROR(Common(&o));
      o.weight = weight;
      o.bias = bias;
      o.running_mean = rm;
      o.running_var = rv;
      o.use_running_stats = f_.GetBool("use-running-stats");
      o.eps = eps;
      o.layout = layout;
      r = Call(MakeRequest(x, o));
    }
    if (!r.ok()) return r.status();
    return WriteResult(*r);
  }
  if (op == "qk-norm") {
    NORMD_ASSIGN_OR_RETURN(auto q, Required("q"));
    NORMD_ASSIGN_OR_RETURN(auto k, Required("k"));
    QkNormOptions o;
    NORMD_RETURN_IF_ERROR(Common(&o));
    NORMD_ASSIGN_OR_RETURN(auto qw, Param("q-weight"));
    NORMD_ASSIGN_OR_RETURN(auto kw, Param("k-weight"));
    const std::string kind = f_.GetString("kind", "rms");
    if (kind == "rms")
      o.kind = QkNormOptions::Kind::kRms;
    else if (kind == "layer")
      o.kind = QkNormOptions::Kind::kLayer;
    else if (kind == "l2")
      o.kind = QkNormOptions::Kind::kL2;
    else
      return absl::InvalidArgumentError(
          absl::StrCat("--kind: expected rms, layer or l2, got '", kind, "'"));
    o.q_weight = qw;
    o.k_weight = kw;
    o.eps = eps;
    NORMD_ASSIGN_OR_RETURN(auto r, Call(MakeRequest(q, k, o)));
    NORMD_RETURN_IF_ERROR(Write("q-out", r.output));
    return Write("k-out", r.k_output);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown OP '", op, "'"));
}

}  // namespace
}  // namespace normd

int main(int argc, char** argv) {
  std::map<std::string, bool> known = normd::kFlags;
  normd::AddCredentialFlags(&known);
  normd::CliFlags flags(known);
  absl::Status s = flags.Parse(argc, argv);
  if (s.ok() && flags.GetBool("help")) {
    std::fputs(normd::kUsage, stdout);
    std::fputs(normd::kCredentialUsage, stdout);
    return 0;
  }
  if (s.ok() && flags.positional().size() != 1) {
    s = absl::InvalidArgumentError("expected exactly one OP");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "normctl: %s\n%s", std::string(s.message()).c_str(), normd::kUsage);
    return 2;
  }
  normd::Ctl ctl(flags);
  s = ctl.Run(flags.positional().front());
  if (!s.ok()) {
    std::fprintf(stderr, "normctl: %s: %s\n", absl::StatusCodeToString(s.code()).c_str(),
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
