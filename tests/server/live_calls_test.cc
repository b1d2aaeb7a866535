// The count of live call objects that NormServer::Shutdown waits on before it closes the
// completion queues (live_calls.h): tokens count while held, a wait with one held times
// out, and a wait ends when another thread lets the last go.
#include "server/live_calls.h"

#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace normd::server {
namespace {

TEST(LiveCallsTest, CountsHeldTokensAndWaitsForNone) {
  LiveCalls calls;
  EXPECT_TRUE(calls.AwaitNone(absl::ZeroDuration()));
  auto a = std::make_unique<LiveCalls::Token>(&calls);
  auto b = std::make_unique<LiveCalls::Token>(&calls);
  EXPECT_EQ(calls.count(), 2);
  EXPECT_FALSE(calls.AwaitNone(absl::Milliseconds(20)));
  a.reset();
  EXPECT_EQ(calls.count(), 1);

  std::thread releaser([&b] {
    absl::SleepFor(absl::Milliseconds(50));
    b.reset();
  });
  EXPECT_TRUE(calls.AwaitNone(absl::Seconds(30)));
  EXPECT_EQ(calls.count(), 0);
  releaser.join();
}

}  // namespace
}  // namespace normd::server
