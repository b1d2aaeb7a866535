// Writes the fuzzers' seed corpora (tests/fuzz/corpus/<target>/): valid inputs of every
// kind, from which libFuzzer's mutations start. Run after a change to the request format:
//   build-asan/tests/fuzz/normd-fuzz-seeds tests/fuzz/corpus
// Each file is named for what it holds, so the committed corpus reads as a list of cases.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "client/npy.h"
#include "tests/server/request_factory.h"

namespace {

using namespace normd::testing;  // NOLINT: request factories
using normd::v1::DataType;
using normd::v1::NormalizeRequest;

std::filesystem::path root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = root / target;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::vector<std::pair<std::string, NormalizeRequest>> Requests() {
  std::vector<std::pair<std::string, NormalizeRequest>> r;
  r.emplace_back("layer_norm", LayerNormRequest({3, 2, 5}));
  NormalizeRequest ln2 = LayerNormRequest({2, 3, 4});
  ln2.mutable_layer_norm()->set_normalized_ndim(2);
  FillTensor(ln2.mutable_layer_norm()->mutable_weight(), normd::v1::DATA_TYPE_F32, {3, 4});
  FillTensor(ln2.mutable_layer_norm()->mutable_bias(), normd::v1::DATA_TYPE_F32, {3, 4});
  r.emplace_back("layer_norm_ndim2", ln2);
  NormalizeRequest post = LayerNormRequest({2, 8});
  FillTensor(post.mutable_layer_norm()->mutable_residual()->mutable_skip(),
             normd::v1::DATA_TYPE_F32, {2, 8});
  post.mutable_layer_norm()->mutable_residual()->set_alpha(2.0);
  post.mutable_layer_norm()->mutable_residual()->set_return_sum(true);
  r.emplace_back("layer_norm_deepnorm", post);
  r.emplace_back("rms_norm", RmsNormRequest({4, 6}));
  NormalizeRequest bf16 = RmsNormRequest({2, 16});
  FillTensor(bf16.mutable_input(), normd::v1::DATA_TYPE_BF16, {2, 16});
  FillTensor(bf16.mutable_rms_norm()->mutable_weight(), normd::v1::DATA_TYPE_BF16, {16});
  bf16.mutable_rms_norm()->set_cast_before_weight(true);
  r.emplace_back("rms_norm_hf_bf16", bf16);
  NormalizeRequest gemma = RmsNormRequest({2, 8});
  FillTensor(gemma.mutable_input(), normd::v1::DATA_TYPE_F16, {2, 8});
  gemma.mutable_rms_norm()->set_weight_offset(1.0);
  gemma.set_output_dtype(normd::v1::DATA_TYPE_F32);
  r.emplace_back("rms_norm_gemma_f16", gemma);
  NormalizeRequest partial = RmsNormRequest({2, 8});
  partial.mutable_rms_norm()->set_partial_fraction(0.25);
  r.emplace_back("rms_norm_partial", partial);
  NormalizeRequest fused = RmsNormRequest({2, 4});
  FillTensor(fused.mutable_rms_norm()->mutable_residual()->mutable_skip(), normd::v1::DATA_TYPE_F32,
             {2, 4});
  fused.mutable_rms_norm()->mutable_residual()->set_return_sum(true);
  r.emplace_back("rms_norm_fused_add", fused);
  NormalizeRequest l2;
  l2.set_id("l2");
  FillTensor(l2.mutable_input(), normd::v1::DATA_TYPE_F32, {3, 7});
  l2.mutable_l2_norm()->set_eps(1e-12);
  r.emplace_back("l2_norm", l2);
  r.emplace_back("batch_norm_training", BatchNormRequest(true));
  r.emplace_back("batch_norm_eval", BatchNormRequest(false));
  NormalizeRequest nhwc = BatchNormRequest(true, {2, 3, 3, 4});
  nhwc.mutable_batch_norm()->set_layout(normd::v1::LAYOUT_CHANNELS_LAST);
  FillTensor(nhwc.mutable_batch_norm()->mutable_running_mean(), normd::v1::DATA_TYPE_F32, {4});
  FillTensor(nhwc.mutable_batch_norm()->mutable_running_var(), normd::v1::DATA_TYPE_F32, {4}, 1);
  r.emplace_back("batch_norm_channels_last", nhwc);
  r.emplace_back("group_norm", GroupNormRequest(2));
  r.emplace_back("instance_norm", InstanceNormRequest());
  r.emplace_back("qk_norm", QkNormRequest());
  return r;
}

// The shared-memory fuzzer's table: `count` regions, each (name, object, offset, size).
std::string Table(std::vector<std::vector<int32_t>> regions) {
  std::string t(1, static_cast<char>(regions.size()));
  for (const auto& g : regions) {
    t.push_back(static_cast<char>(g[0]));
    t.push_back(static_cast<char>(g[1]));
    for (int k = 2; k < 4; ++k) {
      char le[4];
      std::memcpy(le, &g[k], 4);
      t.append(le, 4);
    }
  }
  return t;
}

void SharedMemorySeeds() {
  // Input in r0 (object a from 0), output in r1 (object b from 64).
  NormalizeRequest ln = LayerNormRequest({2, 4});
  auto* in = ln.mutable_input();
  in->clear_data();
  in->mutable_shared_memory()->set_region("r0");
  in->mutable_shared_memory()->set_byte_size(32);
  ln.mutable_output_shared_memory()->set_region("r1");
  ln.mutable_output_shared_memory()->set_byte_size(32);
  Write("shared_memory", "layer_norm_in_out",
        Table({{0, 0, 0, 4096}, {1, 1, 64, 256}}) + ln.SerializeAsString());
  // In place: the output is the input's own range.
  NormalizeRequest inplace = ln;
  *inplace.mutable_output_shared_memory() = in->shared_memory();
  Write("shared_memory", "layer_norm_in_place",
        Table({{0, 0, 100, 4000}}) + inplace.SerializeAsString());
  // Fused residual: skip and sum in regions too.
  NormalizeRequest fused = RmsNormRequest({2, 4});
  fused.mutable_input()->clear_data();
  fused.mutable_input()->mutable_shared_memory()->set_region("r0");
  fused.mutable_input()->mutable_shared_memory()->set_byte_size(32);
  auto* res = fused.mutable_rms_norm()->mutable_residual();
  FillTensor(res->mutable_skip(), normd::v1::DATA_TYPE_F32, {2, 4});
  res->mutable_skip()->clear_data();
  res->mutable_skip()->mutable_shared_memory()->set_region("r0");
  res->mutable_skip()->mutable_shared_memory()->set_offset(32);
  res->mutable_skip()->mutable_shared_memory()->set_byte_size(32);
  res->set_return_sum(true);
  fused.mutable_output_shared_memory()->set_region("r2");
  fused.mutable_output_shared_memory()->set_byte_size(32);
  fused.mutable_residual_sum_shared_memory()->set_region("r2");
  fused.mutable_residual_sum_shared_memory()->set_offset(32);
  fused.mutable_residual_sum_shared_memory()->set_byte_size(32);
  Write("shared_memory", "rms_norm_fused_add",
        Table({{0, 0, 8192, 64}, {2, 1, 4936, 64}}) + fused.SerializeAsString());
  // QK-norm: q and k in one region, both outputs in another.
  NormalizeRequest qk = QkNormRequest(8, 8);
  for (auto* t : {qk.mutable_qk_norm()->mutable_q(), qk.mutable_qk_norm()->mutable_k()}) {
    const int64_t bytes = static_cast<int64_t>(t->data().size());
    t->clear_data();
    t->mutable_shared_memory()->set_region("r0");
    t->mutable_shared_memory()->set_offset(t == qk.mutable_qk_norm()->mutable_k() ? bytes : 0);
    t->mutable_shared_memory()->set_byte_size(bytes);
  }
  Write("shared_memory", "qk_norm", Table({{0, 0, 0, 16384}}) + qk.SerializeAsString());
  // A region that does not fit its object, and a missing object: refused registrations.
  Write("shared_memory", "bad_regions",
        Table({{0, 1, 4900, 200}, {1, 2, 0, 16}, {3, 0, -1, 8}}) + ln.SerializeAsString());
}

void NpySeeds() {
  using normd::DType;
  using normd::HostTensor;
  Write("npy", "f32_2x3",
        normd::SerializeNpy(HostTensor::FromFloats(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6})));
  Write("npy", "f16_4",
        normd::SerializeNpy(HostTensor::FromFloats(DType::kF16, {4}, {1, -2, 0.5f, 65504})));
  Write("npy", "f32_scalar", normd::SerializeNpy(HostTensor::FromFloats(DType::kF32, {}, {7})));
  Write("npy", "f32_empty", normd::SerializeNpy(HostTensor(DType::kF32, {0, 5})));
  // Version 2.0 (4-byte header length) and '<f8', as NumPy writes them.
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  header.append(128 - 12 - header.size() - 1, ' ');  // the data starts 64-aligned
  header.push_back('\n');
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  const uint32_t len = static_cast<uint32_t>(header.size());
  v2.append(reinterpret_cast<const char*>(&len), 4);
  v2 += header;
  const double values[2] = {1.5, -3.25};
  v2.append(reinterpret_cast<const char*>(values), sizeof(values));
  Write("npy", "f8_v2", v2);
}

void ConfigSeeds() {
  auto join = [](int argc, std::vector<std::string> parts) {
    std::string s(1, static_cast<char>(argc));
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) s.push_back('\0');
      s += parts[i];
    }
    return s;
  };
  Write("config", "defaults", join(0, {}));
  Write("config", "flags",
        join(6, {"--listen=127.0.0.1:50051", "--max-queue-bytes=512MiB", "--batch-max-delay",
                 "200us", "--drain-delay=5s", "--no-cuda"}));
  Write("config", "environment",
        join(0, {"NORMD_MAX_MESSAGE_BYTES=64MiB", "NORMD_SHUTDOWN_TIMEOUT=1m30s",
                 "NORMD_LOG_FORMAT=json", "NORMD_SERVICE_HOST=10.0.0.1", "PATH=/bin"}));
  Write("config", "flag_wins",
        join(1, {"--cpu-threads=2", "NORMD_CPU_THREADS=8", "NORMD_STREAM_WINDOW=16"}));
  Write("config", "keepalive",
        join(4, {"--keepalive-time=30s", "--keepalive-timeout=10s", "--max-connection-age=1h",
                 "--grpc-args=grpc.http2.max_pings_without_data=0"}));
  Write(
      "config", "sizes",
      join(3, {"--max-message-bytes=1GiB", "--inline-max-bytes=0", "--batch-max-bytes=16777216"}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: normd-fuzz-seeds <corpus directory>\n";
    return 2;
  }
  root = argv[1];
  for (const auto& [name, request] : Requests())
    Write("request", name, request.SerializeAsString());
  SharedMemorySeeds();
  NpySeeds();
  ConfigSeeds();
  return 0;
}
