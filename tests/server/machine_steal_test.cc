// MachineStealTime reads the hypervisor's steal from /proc/stat; StealMs subtracts two
// readings and says -1 when either is missing.
#include "normd/common/machine_steal.h"

#include <fstream>

#include "gtest/gtest.h"

namespace normd {
namespace {

TEST(MachineStealTest, ReadsANonDecreasingTotalOnLinux) {
  std::ifstream stat("/proc/stat");
  if (!stat) GTEST_SKIP() << "no /proc/stat here";
  const std::optional<absl::Duration> a = MachineStealTime();
  ASSERT_TRUE(a.has_value()) << "/proc/stat has no steal column";
  EXPECT_GE(*a, absl::ZeroDuration());
  const std::optional<absl::Duration> b = MachineStealTime();
  ASSERT_TRUE(b.has_value());
  EXPECT_GE(*b, *a);
  EXPECT_GE(StealMs(a, b), 0);
}

TEST(MachineStealTest, StealMsIsTheDifferenceOrMinusOne) {
  EXPECT_EQ(StealMs(absl::Milliseconds(1500), absl::Milliseconds(1750)), 250);
  EXPECT_EQ(StealMs(std::nullopt, absl::Milliseconds(5)), -1);
  EXPECT_EQ(StealMs(absl::Milliseconds(5), std::nullopt), -1);
}

}  // namespace
}  // namespace normd
