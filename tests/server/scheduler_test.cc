// The Scheduler alone: Enqueue's ownership rule, routing, the inline path, and queued
// work dropped by the executor when its deadline passed or its call was cancelled.
#include "normd/scheduling/scheduler.h"

#include <atomic>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "normd/testing/gated_backend.h"
#include "tests/kernels/test_util.h"

namespace normd::server {
namespace {

using normd::testing::Buffer;
using normd::testing::GatedBackend;

// An RMSNorm job over owned buffers, and what its done callback saw.
struct Probe {
  Buffer x{kernels::DType::kF32, 0}, y{kernels::DType::kF32, 0};
  absl::Notification done;
  absl::Status status;
  WorkResult result;
  std::thread::id thread;

  std::unique_ptr<Work> Make(int64_t rows, int64_t cols) {
    x = Buffer::Of(kernels::DType::kF32, std::vector<float>(rows * cols, 2.0f));
    y = Buffer(kernels::DType::kF32, rows * cols);
    auto w = std::make_unique<Work>();
    w->job.family = Job::Family::kRowNorm;
    w->job.row.rows = rows;
    w->job.row.cols = cols;
    w->job.row.x = x.view();
    w->job.row.y = y.view_mut();
    w->bytes = rows * cols * 8;
    w->done = [this](const absl::Status& s, const WorkResult& r) {
      status = s;
      result = r;
      thread = std::this_thread::get_id();
      done.Notify();
    };
    return w;
  }
};

std::vector<std::shared_ptr<kernels::Backend>> Gated(std::shared_ptr<GatedBackend> g) {
  return {std::move(g)};
}

TEST(SchedulerTest, RefusedWorkStaysWithTheCallerAndIsNeverAnswered) {
  auto gate = std::make_shared<GatedBackend>();
  SchedulerOptions o;
  o.inline_max_bytes = 0;
  o.max_queue_requests = 1;
  o.cpu_executors = 1;
  Scheduler s(Gated(gate), o);
  Probe cuda;
  std::unique_ptr<Work> w = cuda.Make(1, 4);
  w->job.preference = BackendPreference::kCuda;
  absl::StatusOr<uint64_t> id = s.Enqueue(w);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_NE(w, nullptr);

  gate->Close();
  absl::Cleanup open_on_exit = [&] { gate->Open(); };  // a failed ASSERT must not hang ~Scheduler
  Probe running, queued, refused;
  std::unique_ptr<Work> a = running.Make(1, 4), b = queued.Make(2, 4), c = refused.Make(3, 4);
  ASSERT_TRUE(s.Enqueue(a).ok());
  EXPECT_EQ(a, nullptr);
  gate->AwaitEntered(1);
  ASSERT_TRUE(s.Enqueue(b).ok());
  absl::StatusOr<uint64_t> full = s.Enqueue(c);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kUnavailable);
  ASSERT_NE(c, nullptr);
  gate->Open();
  running.done.WaitForNotification();
  queued.done.WaitForNotification();
  EXPECT_TRUE(running.status.ok());
  EXPECT_TRUE(queued.status.ok());
  EXPECT_FALSE(refused.done.HasBeenNotified());
  EXPECT_FALSE(cuda.done.HasBeenNotified());
}

// A call cancelled or past its deadline before Enqueue (its cancel may race with the
// handler) is refused with that status: neither queued nor run inline, never answered.
TEST(SchedulerTest, WorkAlreadyCancelledOrExpiredIsRefused) {
  auto gate = std::make_shared<GatedBackend>();
  SchedulerOptions o;
  o.cpu_executors = 1;  // inline path on: a live small request would run at once
  Scheduler s(Gated(gate), o);
  std::atomic<bool> cancelled{true};
  Probe a, b;
  std::unique_ptr<Work> wa = a.Make(1, 4), wb = b.Make(1, 4);
  wa->cancelled = &cancelled;
  wb->deadline = absl::Now() - absl::Milliseconds(1);
  EXPECT_EQ(s.Enqueue(wa).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(s.Enqueue(wb).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_NE(wa, nullptr);
  ASSERT_NE(wb, nullptr);
  EXPECT_FALSE(a.done.HasBeenNotified());
  EXPECT_FALSE(b.done.HasBeenNotified());
  EXPECT_TRUE(gate->calls().empty()) << "refused work reached the backend";
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.enqueued, 0);
  EXPECT_EQ(st.in_flight, 0);
}

TEST(SchedulerTest, SmallWorkRunsInlineOnlyWhenTheQueueIsEmpty) {
  auto gate = std::make_shared<GatedBackend>();
  SchedulerOptions o;
  o.cpu_executors = 1;
  Scheduler s(Gated(gate), o);
  Probe small;
  std::unique_ptr<Work> w = small.Make(1, 16);
  ASSERT_TRUE(s.Enqueue(w).ok());
  ASSERT_TRUE(small.done.HasBeenNotified()) << "not answered before Enqueue returned";
  EXPECT_TRUE(small.thread == std::this_thread::get_id());
  EXPECT_FLOAT_EQ(small.y.at(0), 1.0f);
  Probe big;
  std::unique_ptr<Work> b = big.Make(1024, 1024);  // 8 MiB: above inline_max_bytes
  ASSERT_TRUE(s.Enqueue(b).ok());
  big.done.WaitForNotification();
  EXPECT_TRUE(big.thread != std::this_thread::get_id());
  // Tensors in shared memory: the message pins little, the work is still 8 MiB.
  Probe shared;
  std::unique_ptr<Work> m = shared.Make(1024, 1024);
  m->bytes = 300;
  m->job.input_bytes = 1024 * 1024 * 4;
  ASSERT_TRUE(s.Enqueue(m).ok());
  shared.done.WaitForNotification();
  EXPECT_TRUE(shared.thread != std::this_thread::get_id());
  EXPECT_EQ(s.stats().inline_runs, 1);
}

TEST(SchedulerTest, ExecutorDropsExpiredAndCancelledWorkWithoutComputing) {
  auto gate = std::make_shared<GatedBackend>();
  SchedulerOptions o;
  o.inline_max_bytes = 0;
  o.cpu_executors = 1;
  Scheduler s(Gated(gate), o);
  gate->Close();
  // A failed ASSERT must not leave the executor stuck at the gate while ~Scheduler joins it.
  absl::Cleanup open_on_exit = [&] { gate->Open(); };
  Probe running, expired, cancelled, fine;
  std::atomic<bool> flag{false};
  std::unique_ptr<Work> a = running.Make(1, 4), b = expired.Make(2, 4), c = cancelled.Make(3, 4),
                        d = fine.Make(4, 4);
  c->cancelled = &flag;
  ASSERT_TRUE(s.Enqueue(a).ok());
  gate->AwaitEntered(1);
  // The deadline is set only now, with room to spare: a slow start (ThreadSanitizer's build
  // takes tens of milliseconds to start a thread) must not expire it before it is queued.
  b->deadline = absl::Now() + absl::Milliseconds(200);
  for (auto* w : {&b, &c, &d}) ASSERT_TRUE(s.Enqueue(*w).ok());
  flag = true;
  absl::SleepFor(absl::Milliseconds(250));
  gate->Open();
  for (Probe* p : {&running, &expired, &cancelled, &fine}) p->done.WaitForNotification();
  EXPECT_EQ(expired.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(cancelled.status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(fine.status.ok());
  EXPECT_EQ(expired.y.at(0), 0.0f);
  EXPECT_EQ(cancelled.y.at(0), 0.0f);
  const auto calls = gate->calls();
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_EQ(calls[1].size(), 1u);
  EXPECT_EQ(calls[1][0].rows, 4);
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.expired, 1);
  EXPECT_EQ(st.cancelled, 1);
  EXPECT_EQ(st.queued_bytes, 0);
}

TEST(SchedulerTest, CancelTakesOnlyQueuedWork) {
  auto gate = std::make_shared<GatedBackend>();
  SchedulerOptions o;
  o.inline_max_bytes = 0;
  o.cpu_executors = 1;
  Scheduler s(Gated(gate), o);
  gate->Close();
  Probe running, queued;
  std::unique_ptr<Work> a = running.Make(1, 4), b = queued.Make(2, 4);
  const uint64_t ida = *s.Enqueue(a);
  gate->AwaitEntered(1);
  const uint64_t idb = *s.Enqueue(b);
  EXPECT_FALSE(s.Cancel(ida, absl::CancelledError("x")));
  EXPECT_TRUE(s.Cancel(idb, absl::CancelledError("x")));
  EXPECT_TRUE(queued.done.HasBeenNotified());
  EXPECT_EQ(queued.status.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(s.Cancel(idb, absl::CancelledError("x")));
  gate->Open();
  running.done.WaitForNotification();
  EXPECT_TRUE(running.status.ok());
}

}  // namespace
}  // namespace normd::server

namespace normd::server {
namespace {

// AUTO routing with a CUDA backend present (a gated backend that reports itself as CUDA
// and computes on the CPU): inputs of at least cuda_min_bytes go to CUDA, smaller ones to
// the CPU, and an unhealthy CUDA backend is skipped; explicit preferences are honoured.
TEST(SchedulerTest, AutoRoutesBySizeAndSkipsAnUnhealthyCudaBackend) {
  auto cpu = std::make_shared<GatedBackend>(kernels::BackendKind::kCpu);
  auto cuda = std::make_shared<GatedBackend>(kernels::BackendKind::kCuda);
  SchedulerOptions o;
  o.inline_max_bytes = 0;
  o.cuda_min_bytes = 1024;
  Scheduler s({cpu, cuda}, o);
  struct Case {
    const char* what;
    BackendPreference preference;
    int64_t input_bytes;
    bool cuda_healthy;
    kernels::BackendKind want;
  };
  using K = kernels::BackendKind;
  for (const Case& c :
       {Case{"auto, large", BackendPreference::kAuto, 1024, true, K::kCuda},
        Case{"auto, small", BackendPreference::kAuto, 1023, true, K::kCpu},
        Case{"auto, large, cuda unhealthy", BackendPreference::kAuto, 1 << 20, false, K::kCpu},
        Case{"cpu, large", BackendPreference::kCpu, 1 << 20, true, K::kCpu},
        Case{"cuda, small", BackendPreference::kCuda, 16, true, K::kCuda}}) {
    SCOPED_TRACE(c.what);
    cuda->set_healthy(c.cuda_healthy);
    const int cpu_before = cpu->entered(), cuda_before = cuda->entered();
    Probe p;
    std::unique_ptr<Work> w = p.Make(1, 4);
    w->job.preference = c.preference;
    w->job.input_bytes = c.input_bytes;
    ASSERT_TRUE(s.Enqueue(w).ok());
    p.done.WaitForNotification();
    ASSERT_TRUE(p.status.ok()) << p.status;
    EXPECT_EQ(p.result.backend, c.want);
    EXPECT_EQ(cuda->entered() - cuda_before, c.want == K::kCuda ? 1 : 0);
    EXPECT_EQ(cpu->entered() - cpu_before, c.want == K::kCpu ? 1 : 0);
  }
}

}  // namespace
}  // namespace normd::server
