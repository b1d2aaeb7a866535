#include "tests/fuzz/fuzz_service.h"

#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/grpc.h"
#include "grpcpp/support/byte_buffer.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/scheduling/scheduler.h"
#include "server/answer_wire.h"
#include "server/call_env.h"
#include "server/field_error.h"

namespace normd::fuzz {
namespace {

server::Scheduler& SharedScheduler() {
  // One CPU thread: the fuzzer's throughput comes from many short runs, not from threads.
  static server::Scheduler* scheduler = [] {
    std::vector<std::shared_ptr<kernels::Backend>> backends;
    kernels::CpuBackendOptions cpu;
    cpu.threads = 1;
    backends.push_back(std::make_shared<kernels::CpuBackend>(cpu));
    server::SchedulerOptions options;
    options.max_queue_bytes = int64_t{64} << 20;
    return new server::Scheduler(std::move(backends), options);
  }();
  return *scheduler;
}

int64_t ElementSize(v1::DataType dtype) {
  return dtype == v1::DATA_TYPE_F32                                  ? 4
         : dtype == v1::DATA_TYPE_F16 || dtype == v1::DATA_TYPE_BF16 ? 2
                                                                     : 0;
}

// An output tensor the server allocated: known dtype, and data exactly shape's bytes
// (or none when it went to shared memory).
void CheckOutput(const v1::Tensor& t, const char* what) {
  if (!t.has_shared_memory() && t.shape_size() == 0 && t.data().empty()) return;  // absent
  const int64_t elem = ElementSize(t.dtype());
  FUZZ_CHECK(elem > 0, "%s has dtype %d", what, static_cast<int>(t.dtype()));
  int64_t numel = 1;
  for (int64_t d : t.shape()) {
    FUZZ_CHECK(d >= 0 && d <= kMaxElements, "%s has dim %lld", what, static_cast<long long>(d));
    numel *= d;
  }
  FUZZ_CHECK(numel <= kMaxElements, "%s has %lld elements", what, static_cast<long long>(numel));
  const int64_t want = t.has_shared_memory() ? 0 : numel * elem;
  FUZZ_CHECK(static_cast<int64_t>(t.data().size()) == want, "%s has %zu bytes, expected %lld", what,
             t.data().size(), static_cast<long long>(want));
}

}  // namespace

void Initialize() {
  grpc_init();
  google::protobuf::SetLogHandler(nullptr);
}

bool Serve(const v1::NormalizeRequest& request, server::SharedMemoryRegistry* registry) {
  server::CallEnv env;
  env.scheduler = &SharedScheduler();
  env.shared_memory = registry;
  env.options.limits.max_elements = kMaxElements;
  v1::NormalizeResponse answer;
  absl::StatusOr<std::unique_ptr<server::Work>> work =
      server::MakeWork(env, request, &answer, absl::InfiniteFuture(), nullptr);
  if (!work.ok()) {
    const absl::Status& s = work.status();
    FUZZ_CHECK(s.GetPayload(server::kBadRequestTypeUrl).has_value(),
               "refused without naming a field: %s", s.ToString().c_str());
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument ||
                   s.code() == absl::StatusCode::kUnimplemented,
               "refused with an unexpected code: %s", s.ToString().c_str());
    v1::NormalizeResponse only_id;
    only_id.set_id(request.id());
    FUZZ_CHECK(answer.SerializeAsString() == only_id.SerializeAsString(),
               "a refused request's response holds more than its id");
    return false;
  }
  CheckOutput(answer.output(), "output");
  CheckOutput(answer.k_output(), "k_output");
  CheckOutput(answer.residual_sum(), "residual_sum");
  CheckOutput(answer.batch_mean(), "batch_mean");
  CheckOutput(answer.batch_var(), "batch_var");
  CheckOutput(answer.running_mean(), "running_mean");
  CheckOutput(answer.running_var(), "running_var");
  absl::Notification done;
  absl::Status result;
  (*work)->done = [&](const absl::Status& s, const server::WorkResult&) {
    result = s;
    done.Notify();
  };
  absl::StatusOr<uint64_t> id = SharedScheduler().Enqueue(*work);
  // AUTO or CPU run here; a CUDA preference has no backend (FAILED_PRECONDITION).
  if (!id.ok()) {
    FUZZ_CHECK(id.status().code() == absl::StatusCode::kFailedPrecondition, "enqueue refused: %s",
               id.status().ToString().c_str());
    return false;
  }
  done.WaitForNotification();
  FUZZ_CHECK(result.ok(), "an accepted request failed: %s", result.ToString().c_str());
  // A small zero-copy threshold, so that outputs also travel as slices of their buffers.
  grpc::ByteBuffer wire = server::SerializeAnswer(&answer, /*zero_copy_bytes=*/64);
  std::vector<grpc::Slice> slices;
  FUZZ_CHECK(wire.Dump(&slices).ok(), "answer buffer unreadable");
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  v1::NormalizeResponse reparsed;
  FUZZ_CHECK(reparsed.ParseFromString(bytes), "the answer is not a NormalizeResponse");
  FUZZ_CHECK(reparsed.id() == request.id(), "the answer lost the request's id");
  return true;
}

}  // namespace normd::fuzz
