// Hostile input over loopback gRPC, as a broken or malicious client sends it, against a
// real normd on the CPU backend: bytes that are no message, truncations of valid requests
// of every op, payloads over the message limit, hostile shapes ([2^62, 8], [-1], ...) and
// malformed dtypes and data in every tensor field of every op, every scalar option of
// every op at hostile values (NaN, infinities, negatives, extremes, unknown enums), and
// bad shared-memory
// references. Every call is sent as raw bytes (no client-side checks in the way) and must
// end with its documented code, INVALID_ARGUMENT naming a field where the request is
// malformed. Meanwhile a well-behaved client on its own connection keeps calling, and
// every one of its answers must be OK and bit-identical to the first; afterwards the
// server still answers, and the process's resident memory after the last of several
// rounds is within a bound of where the second round left it.
#include <malloc.h>

#include <cmath>
#include <fstream>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "normd/shared_memory.h"
#include "server/server.h"
#include "tests/server/request_factory.h"
#include "tests/server/sanitized.h"  // no RSS bound under a sanitizer

namespace normd {
namespace {

using namespace normd::testing;  // NOLINT: request factories

struct Answer {
  grpc::StatusCode code;
  std::string field;  // the BadRequest's first field violation, if any
  std::string message;
  std::string bytes;  // the response, when OK
};

// Unary Normalize with `bytes` as the request message.
Answer Call(grpc::GenericStub& stub, const std::string& bytes) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/normd.v1.NormService/Normalize", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) { done.set_value(s); });
  const grpc::Status s = done.get_future().get();
  Answer a{s.error_code(), "", s.error_message(), ""};
  google::rpc::Status details;
  if (!s.error_details().empty() && details.ParseFromString(s.error_details())) {
    for (const auto& any : details.details()) {
      google::rpc::BadRequest bad;
      if (any.UnpackTo(&bad) && bad.field_violations_size() > 0) {
        a.field = bad.field_violations(0).field();
      }
    }
  }
  if (s.ok()) {
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    for (const auto& piece : slices) {
      a.bytes.append(reinterpret_cast<const char*>(piece.begin()), piece.size());
    }
  }
  return a;
}

// Resident memory once free heap pages have gone back to the system (malloc_trim, what
// normd's own trimming does periodically): what the process holds, not what glibc caches.
int64_t ResidentBytes() {
  malloc_trim(0);
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "VmRSS:")) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// Every Tensor field set in `m`, with its path ("layer_norm.residual.skip").
void TensorFields(google::protobuf::Message* m, const std::string& prefix,
                  std::vector<std::pair<std::string, v1::Tensor*>>* out) {
  const auto* reflection = m->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
      continue;
    }
    google::protobuf::Message* sub = reflection->MutableMessage(m, f);
    const std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (auto* t = dynamic_cast<v1::Tensor*>(sub)) {
      out->emplace_back(path, t);
    } else {
      TensorFields(sub, path, out);
    }
  }
}

using FieldPath = std::vector<const google::protobuf::FieldDescriptor*>;

// Every scalar field (number, enum or bool, set or not) of `m`'s type and of the messages
// set in it, tensors aside: the options of an op and of the request.
void ScalarFields(const google::protobuf::Message& m, FieldPath prefix,
                  std::vector<FieldPath>* out) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      continue;
    }
    FieldPath path = prefix;
    path.push_back(f);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      out->push_back(path);
    } else if (m.GetReflection()->HasField(m, f) && f->message_type() != v1::Tensor::descriptor()) {
      ScalarFields(m.GetReflection()->GetMessage(m, f), path, out);
    }
  }
}

std::string PathName(const FieldPath& path) {
  std::string name;
  for (const auto* f : path) absl::StrAppend(&name, name.empty() ? "" : ".", f->name());
  return name;
}

// `r` with the field at `path` set to the k-th hostile value of its type; false when the
// type has no k-th value.
bool SetHostile(v1::NormalizeRequest* r, const FieldPath& path, int k) {
  using FD = google::protobuf::FieldDescriptor;
  google::protobuf::Message* m = r;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    m = m->GetReflection()->MutableMessage(m, path[i]);
  }
  const FD* f = path.back();
  const auto* reflection = m->GetReflection();
  const double reals[] = {std::nan(""), INFINITY, -INFINITY, -1, 0, -0.0, 1e30, 1e-45};
  const int64_t ints[] = {-1, 0, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 1 << 20};
  switch (f->cpp_type()) {
    case FD::CPPTYPE_FLOAT:
    case FD::CPPTYPE_DOUBLE:
      if (k >= static_cast<int>(std::size(reals))) return false;
      f->cpp_type() == FD::CPPTYPE_FLOAT ? reflection->SetFloat(m, f, static_cast<float>(reals[k]))
                                         : reflection->SetDouble(m, f, reals[k]);
      return true;
    case FD::CPPTYPE_INT32:
    case FD::CPPTYPE_UINT32:
    case FD::CPPTYPE_INT64:
    case FD::CPPTYPE_UINT64:
      if (k >= static_cast<int>(std::size(ints))) return false;
      if (f->cpp_type() == FD::CPPTYPE_INT32)
        reflection->SetInt32(m, f, static_cast<int32_t>(ints[k]));
      if (f->cpp_type() == FD::CPPTYPE_UINT32)
        reflection->SetUInt32(m, f, static_cast<uint32_t>(ints[k]));
      if (f->cpp_type() == FD::CPPTYPE_INT64) reflection->SetInt64(m, f, ints[k]);
      if (f->cpp_type() == FD::CPPTYPE_UINT64)
        reflection->SetUInt64(m, f, static_cast<uint64_t>(ints[k]));
      return true;
    case FD::CPPTYPE_ENUM:
      if (k >= 3) return false;
      reflection->SetEnumValue(m, f, k == 0 ? 99 : k == 1 ? -1 : 0);  // unknown, negative, unset
      return true;
    case FD::CPPTYPE_BOOL:
      if (k >= 2) return false;
      reflection->SetBool(m, f, k == 1);
      return true;
    default:
      return false;
  }
}

std::vector<v1::NormalizeRequest> ValidRequests() {
  std::vector<v1::NormalizeRequest> r = OneOfEachOp();
  v1::NormalizeRequest l2;
  FillTensor(l2.mutable_input(), v1::DATA_TYPE_BF16, {3, 8});
  l2.mutable_l2_norm();
  r.push_back(l2);
  return r;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.max_message_bytes = 4 << 20;
    options.enable_cuda = false;
    options.cpu_threads = 1;
    auto s = server::NormServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    target_ = absl::StrCat("127.0.0.1:", server_->port());
    channel_ = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
  }

  // One round of every hostile input; returns how many calls it made. Fails the test on
  // any answer other than the documented one.
  int Barrage(grpc::GenericStub& stub, SharedMemoryRegion& region, uint64_t seed) {
    int calls = 0;
    auto expect_invalid = [&](const v1::NormalizeRequest& r, const std::string& field,
                              const std::string& what) {
      const Answer a = Call(stub, r.SerializeAsString());
      ++calls;
      EXPECT_EQ(a.code, grpc::StatusCode::INVALID_ARGUMENT) << what << ": " << a.message;
      EXPECT_TRUE(absl::StartsWith(a.field, field))
          << what << ": named '" << a.field << "', expected under '" << field << "'";
    };
    const int64_t hostile_shapes[][4] = {{int64_t{1} << 62, 8, -2, 0},
                                         {-1, -2, 0, 0},
                                         {INT64_MAX, -2, 0, 0},
                                         {INT64_MIN, 1, -2, 0},
                                         {0, -5, -2, 0},
                                         {int64_t{1} << 31, 1 << 31, 1 << 31, -2},
                                         {3, int64_t{1} << 61, 4, -2},
                                         {int64_t{1} << 32, 0, -2, 0}};
    for (const v1::NormalizeRequest& valid : ValidRequests()) {
      const std::string op = valid.GetDescriptor()->FindFieldByNumber(valid.op_case())->name();
      std::vector<std::pair<std::string, v1::Tensor*>> probe;
      v1::NormalizeRequest copy = valid;
      TensorFields(&copy, "", &probe);
      for (size_t k = 0; k < probe.size(); ++k) {
        const std::string path = probe[k].first;
        auto mutate = [&](auto&& change, const std::string& what) {
          v1::NormalizeRequest r = valid;
          std::vector<std::pair<std::string, v1::Tensor*>> fields;
          TensorFields(&r, "", &fields);
          change(fields[k].second);
          expect_invalid(r, path, absl::StrCat(op, " ", path, " ", what));
        };
        for (const auto& shape : hostile_shapes) {
          mutate(
              [&](v1::Tensor* t) {
                t->clear_shape();
                for (int64_t d : shape) {
                  if (d == -2) break;
                  t->add_shape(d);
                }
              },
              "hostile shape");
        }
        mutate([](v1::Tensor* t) { t->clear_shape(); }, "rank 0");
        mutate([](v1::Tensor* t) { t->mutable_shape()->Resize(9, 1); }, "rank 9");
        mutate([](v1::Tensor* t) { t->set_dtype(static_cast<v1::DataType>(99)); }, "dtype 99");
        mutate([](v1::Tensor* t) { t->set_dtype(v1::DATA_TYPE_UNSPECIFIED); }, "no dtype");
        mutate([](v1::Tensor* t) { t->mutable_data()->pop_back(); }, "a byte short");
        mutate([](v1::Tensor* t) { t->mutable_data()->append(4, '\0'); }, "4 bytes long");
        mutate([](v1::Tensor* t) { t->mutable_shared_memory()->set_region("none"); },
               "data and a shared-memory reference");
      }
      // Every scalar option of the op and of the request at its hostile values: a valid
      // combination runs, anything else is INVALID_ARGUMENT naming a field.
      std::vector<FieldPath> scalars;
      ScalarFields(valid, {}, &scalars);
      for (const FieldPath& path : scalars) {
        for (int k = 0;; ++k) {
          v1::NormalizeRequest r = valid;
          if (!SetHostile(&r, path, k)) break;
          const Answer a = Call(stub, r.SerializeAsString());
          ++calls;
          const std::string what = absl::StrCat(op, " ", PathName(path), " value ", k);
          ++(a.code == grpc::StatusCode::OK ? scalar_ok_ : scalar_refused_);
          if (a.code == grpc::StatusCode::OK) {
            v1::NormalizeResponse response;
            EXPECT_TRUE(response.ParseFromString(a.bytes)) << what;
          } else {
            EXPECT_EQ(a.code, grpc::StatusCode::INVALID_ARGUMENT) << what << ": " << a.message;
            EXPECT_FALSE(a.field.empty()) << what << ": no field named: " << a.message;
          }
        }
      }
      // Every truncation of the valid message: parses or not, never anything else.
      const std::string bytes = valid.SerializeAsString();
      for (size_t cut = 0; cut < bytes.size(); cut += 1 + bytes.size() / 40) {
        const Answer a = Call(stub, bytes.substr(0, cut));
        ++calls;
        EXPECT_TRUE(a.code == grpc::StatusCode::INVALID_ARGUMENT || a.code == grpc::StatusCode::OK)
            << op << " cut at " << cut << ": " << a.code << " " << a.message;
      }
    }
    // Bytes that are no message.
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 100; ++i) {
      std::string garbage(rng() % 300, '\0');
      for (char& c : garbage) c = static_cast<char>(rng());
      const Answer a = Call(stub, garbage);
      ++calls;
      EXPECT_TRUE(a.code == grpc::StatusCode::INVALID_ARGUMENT || a.code == grpc::StatusCode::OK)
          << a.code << " " << a.message;
    }
    // Over the 4 MiB message limit.
    const Answer big = Call(stub, std::string((4 << 20) + 64, '\x01'));
    ++calls;
    EXPECT_EQ(big.code, grpc::StatusCode::RESOURCE_EXHAUSTED) << big.message;
    // Bad shared-memory references into a registered 4 KiB region "hostile".
    const v1::SharedMemoryRef bad_refs[] = {region.Ref(0, 32),
                                            region.Ref(-8, 32),
                                            region.Ref(4096 - 16, 32),
                                            region.Ref(0, 31),
                                            region.Ref(INT64_MAX - 8, 32),
                                            region.Ref(0, INT64_MAX)};
    for (size_t i = 0; i < std::size(bad_refs); ++i) {
      v1::NormalizeRequest r = RmsNormRequest({2, 4});
      r.mutable_input()->clear_data();
      *r.mutable_input()->mutable_shared_memory() = bad_refs[i];
      if (i == 0) r.mutable_input()->mutable_shared_memory()->set_region("unknown");
      expect_invalid(r, "input.shared_memory", absl::StrCat("reference ", i));
      v1::NormalizeRequest out = RmsNormRequest({2, 4});
      *out.mutable_output_shared_memory() = bad_refs[i];
      if (i == 0) out.mutable_output_shared_memory()->set_region("unknown");
      expect_invalid(out, "output_shared_memory", absl::StrCat("output reference ", i));
    }
    // An output overlapping an input that a channel op reads across (not in place).
    v1::NormalizeRequest overlap = BatchNormRequest(false, {2, 4, 2});
    overlap.mutable_input()->clear_data();
    *overlap.mutable_input()->mutable_shared_memory() = region.Ref(0, 64);
    *overlap.mutable_output_shared_memory() = region.Ref(32, 64);
    expect_invalid(overlap, "output_shared_memory", "overlapping output");
    return calls;
  }

  std::unique_ptr<server::NormServer> server_;
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  int scalar_ok_ = 0, scalar_refused_ = 0;  // the scalar options' answers
};

TEST_F(HostileInputTest, EveryBadInputGetsItsCodeWhileOthersAreServedAndMemoryStaysFlat) {
  // The well-behaved client: its own connection, the same request again and again.
  grpc::ChannelArguments own;
  own.SetInt("normd.test.own_connection", 1);
  grpc::GenericStub good_stub(
      grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), own));
  const std::string good_request = LayerNormRequest({8, 64}).SerializeAsString();
  const Answer first = Call(good_stub, good_request);
  ASSERT_EQ(first.code, grpc::StatusCode::OK) << first.message;
  std::atomic<bool> stop{false};
  std::atomic<int> good_calls{0}, good_failures{0};
  std::thread good([&] {
    while (!stop.load()) {
      const Answer a = Call(good_stub, good_request);
      ++good_calls;
      // Timing fields differ from call to call; compare the outputs.
      v1::NormalizeResponse got, want;
      if (a.code != grpc::StatusCode::OK || !got.ParseFromString(a.bytes) ||
          !want.ParseFromString(first.bytes) ||
          got.output().SerializeAsString() != want.output().SerializeAsString()) {
        ++good_failures;
      }
    }
  });

  auto client = Client::Create(target_, {});
  ASSERT_TRUE(client.ok()) << client.status();
  auto region = SharedMemoryRegion::Create("hostile", 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE((*client)->RegisterSharedMemory(*region).ok());

  grpc::GenericStub stub(channel_);
  int calls = 0;
  int64_t after_second = 0;
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    calls += Barrage(stub, *region, round);
    if (round == 1) after_second = ResidentBytes();
  }
  const int64_t growth = ResidentBytes() - after_second;
  stop.store(true);
  good.join();
  RecordProperty("hostile_calls", calls);
  RecordProperty("good_calls", good_calls.load());
  RecordProperty("rss_growth_bytes", growth);
  std::cout << "hostile calls " << calls << ", good calls " << good_calls.load()
            << ", RSS growth over rounds 3-" << kRounds << ": " << growth << " bytes\n"
            << "scalar options at hostile values: " << scalar_refused_ << " refused, " << scalar_ok_
            << " valid and served\n";
  // Most hostile values must be refused, or the mutations did not reach the server.
  EXPECT_GT(scalar_refused_, scalar_ok_);
  EXPECT_GT(calls, 1000);
  EXPECT_GT(good_calls.load(), 10);
  EXPECT_EQ(good_failures.load(), 0);
  // The server is still up and still right.
  const Answer after = Call(good_stub, good_request);
  EXPECT_EQ(after.code, grpc::StatusCode::OK) << after.message;
  // Three rounds of the same inputs may settle allocator caches and gRPC's threads, not
  // keep memory. (Under ASan its quarantine holds freed memory on purpose; LeakSanitizer
  // checks for leaks there instead.)
#if !NORMD_SANITIZED
  EXPECT_LT(growth, int64_t{16} << 20);
#endif
}

}  // namespace
}  // namespace normd
