// The positive control of the ThreadSanitizer suite (scripts/test-hardened.sh tsan): while
// two clients keep a live normd busy, two other threads update one plain counter, a data
// race on purpose. It is skipped unless NORMD_TSAN_CONTROL=1; the suite runs it alone and
// fails unless ThreadSanitizer reports this race, which proves that the build is
// instrumented and that the suppressions (tests/sanitizers/tsan.supp) do not hide a race
// between two of our threads while gRPC's threads work around them. (The racing threads
// make no calls themselves: gRPC's mutexes, instrumented in this build, would order them.)
// The racers keep writing until both have written 100000 times, so that their writes
// overlap in time: stop 85's CI run, where each did its writes once and left, saw no
// report. ThreadSanitizer's runtime (libtsan.so.2) clears its shadow memory when its
// slots' epochs or its trace memory run out, which gRPC's busy threads make frequent, and a
// clearing between the two racers' writes hides the race; writes that go on from both
// sides are caught after any clearing.
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "normd/client.h"
#include "server/server.h"
#include "tests/server/request_factory.h"

namespace normd {
namespace {

// Not atomic and not behind a lock: the race the control must see reported. Volatile, so
// that every write in the loops stays a write the sanitizer sees.
volatile int racy_counter = 0;

TEST(TsanControlTest, ARaceBetweenTwoThreadsIsReportedWhileCallsAreServed) {
  if (std::getenv("NORMD_TSAN_CONTROL") == nullptr) {
    GTEST_SKIP() << "the ThreadSanitizer suite's positive control; set NORMD_TSAN_CONTROL=1";
  }
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.enable_cuda = false;
  options.cpu_threads = 1;
  auto server = server::NormServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      auto client = Client::Create(target, ClientOptions{});
      ASSERT_TRUE(client.ok()) << client.status();
      while (!done.load()) {
        auto r = (*client)->Normalize(testing::RmsNormRequest({2, 8}));
        EXPECT_TRUE(r.ok()) << r.status();
      }
    });
  }
  // Relaxed, so that it orders nothing between the racers for ThreadSanitizer.
  std::atomic<int> racers_done{0};
  std::vector<std::thread> racers;
  for (int t = 0; t < 2; ++t) {
    racers.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) racy_counter = racy_counter + 1;
      racers_done.fetch_add(1, std::memory_order_relaxed);
      while (racers_done.load(std::memory_order_relaxed) < 2) racy_counter = racy_counter + 1;
    });
  }
  for (std::thread& r : racers) r.join();
  done = true;
  for (std::thread& c : threads) c.join();
  EXPECT_GT(racy_counter, 0);
}

}  // namespace
}  // namespace normd
