// Nothing a client sends can crash the server: valid requests of every op, mutated at
// random (bytes of the serialized message, shapes, dtypes, scalars), go through
// validation and, when accepted, through the CPU backend. Any accepted request must have
// outputs exactly the size its shape implies. Run under ASan/UBSan for full value.
#include <random>

#include "absl/synchronization/notification.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/scheduling/scheduler.h"
#include "server/request_builder.h"
#include "tests/server/request_factory.h"

namespace normd::server {
namespace {

using namespace normd::testing;  // NOLINT: request factories

std::vector<v1::NormalizeRequest> Seeds() { return OneOfEachOp(); }

void Mutate(std::mt19937_64& rng, v1::NormalizeRequest* r) {
  switch (rng() % 6) {
    case 0: {  // flip bytes of the serialized message and reparse
      std::string bytes = r->SerializeAsString();
      for (int i = 0, n = 1 + rng() % 4; i < n && !bytes.empty(); ++i) {
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      }
      v1::NormalizeRequest parsed;
      if (parsed.ParseFromString(bytes)) *r = parsed;
      break;
    }
    case 1: {  // a wild shape, data unchanged
      v1::Tensor* t = r->has_qk_norm() ? r->mutable_qk_norm()->mutable_q() : r->mutable_input();
      const int64_t wild[] = {0, 1, -1, 3, int64_t{1} << 40, INT64_MAX, INT64_MIN, 2};
      for (int i = 0; i < t->shape_size(); ++i) {
        if (rng() % 2) t->set_shape(i, wild[rng() % 8]);
      }
      if (rng() % 4 == 0) t->add_shape(wild[rng() % 8]);
      break;
    }
    case 2: {  // zero-sized dims, with data emptied to match
      v1::Tensor* t = r->has_qk_norm() ? r->mutable_qk_norm()->mutable_k() : r->mutable_input();
      if (t->shape_size() > 0) t->set_shape(rng() % t->shape_size(), 0);
      if (t->shape_size() > 1) t->set_shape(rng() % t->shape_size(), int64_t{1} << 40);
      t->clear_data();
      break;
    }
    case 3:  // dtype changes
      r->mutable_input()->set_dtype(static_cast<v1::DataType>(rng() % 5));
      r->set_output_dtype(static_cast<v1::DataType>(rng() % 5));
      break;
    case 4:  // scalars
      if (r->has_layer_norm())
        r->mutable_layer_norm()->set_normalized_ndim(static_cast<int>(rng() % 12) - 2);
      if (r->has_group_norm())
        r->mutable_group_norm()->set_num_groups(static_cast<int>(rng() % 20) - 3);
      if (r->has_rms_norm()) r->mutable_rms_norm()->set_partial_fraction((rng() % 7) / 3.0 - 0.5);
      if (r->has_batch_norm())
        r->mutable_batch_norm()->set_layout(static_cast<v1::Layout>(rng() % 3));
      break;
    default:  // truncate a tensor's bytes
      r->mutable_input()->mutable_data()->resize(r->input().data().size() / 2);
      break;
  }
}

TEST(RobustnessTest, MutatedRequestsNeverCrashAndAcceptedOnesRun) {
  // Flipped bytes often make invalid UTF-8 in the id; such messages fail to parse (and are
  // skipped) after protobuf logs each one.
  google::protobuf::LogHandler* previous = google::protobuf::SetLogHandler(nullptr);
  std::vector<std::shared_ptr<kernels::Backend>> backends;
  backends.push_back(std::make_shared<kernels::CpuBackend>());
  Scheduler scheduler(std::move(backends), {});
  // Runs a job through the scheduler and waits for its answer.
  auto run = [&scheduler](Job job) {
    absl::Notification done;
    absl::Status result;
    auto work = std::make_unique<Work>();
    work->job = job;
    work->bytes = 1;
    work->done = [&](const absl::Status& s, const WorkResult&) {
      result = s;
      done.Notify();
    };
    if (absl::StatusOr<uint64_t> id = scheduler.Enqueue(work); !id.ok()) return id.status();
    done.WaitForNotification();
    return result;
  };
  Limits limits;
  limits.max_elements = 1 << 20;
  std::mt19937_64 rng(2024);
  const std::vector<v1::NormalizeRequest> seeds = Seeds();
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    v1::NormalizeRequest r = seeds[rng() % seeds.size()];
    for (int m = 0, n = 1 + rng() % 3; m < n; ++m) Mutate(rng, &r);
    v1::NormalizeResponse response;
    absl::StatusOr<Job> job = BuildJob(r, limits, &response);
    if (!job.ok()) {
      ++rejected;
      EXPECT_FALSE(job.status().message().empty());
      continue;
    }
    ++accepted;
    const v1::Tensor& out = response.output();
    int64_t numel = 1;
    for (int64_t d : out.shape()) numel *= d;
    const int elem = out.dtype() == v1::DATA_TYPE_F32 ? 4 : 2;
    ASSERT_EQ(static_cast<int64_t>(out.data().size()), numel * elem) << r.DebugString();
    ASSERT_TRUE(run(*job).ok()) << r.DebugString();
  }
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(rejected, 1000);
  google::protobuf::SetLogHandler(previous);
}

}  // namespace
}  // namespace normd::server
