#include "server/auth/auth_throttle.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace vramlab::server {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

TEST(AuthThrottleTest, RefusesAPeerAfterMaxFailuresUntilTheOldestLeavesTheWindow) {
  AuthThrottle throttle({.max_failures = 3, .window = absl::Seconds(60)});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(throttle.Check("10.0.0.1", kStart + absl::Seconds(i)).ok());
    throttle.RecordFailure("10.0.0.1", kStart + absl::Seconds(i));
  }
  const absl::Status refused = throttle.Check("10.0.0.1", kStart + absl::Seconds(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry in 50s")) << refused;
  // Another address is not affected.
  EXPECT_TRUE(throttle.Check("10.0.0.2", kStart + absl::Seconds(10)).ok());
  // Still refused just before the first failure is a window old, let in at that moment.
  EXPECT_FALSE(throttle.Check("10.0.0.1", kStart + absl::Seconds(59)).ok());
  EXPECT_TRUE(throttle.Check("10.0.0.1", kStart + absl::Seconds(60)).ok());
  // One more failure fills the window again (failures at 1, 2 and 60) until the one at 1 leaves.
  throttle.RecordFailure("10.0.0.1", kStart + absl::Seconds(60));
  EXPECT_FALSE(throttle.Check("10.0.0.1", kStart + absl::Seconds(60)).ok());
  EXPECT_TRUE(throttle.Check("10.0.0.1", kStart + absl::Seconds(61)).ok());
}

TEST(AuthThrottleTest, FailuresSpreadOverMoreThanAWindowNeverLockOut) {
  AuthThrottle throttle({.max_failures = 2, .window = absl::Seconds(10)});
  for (int i = 0; i < 20; ++i) {
    const absl::Time now = kStart + absl::Seconds(11 * i);
    EXPECT_TRUE(throttle.Check("p", now).ok()) << i;
    throttle.RecordFailure("p", now);
  }
}

TEST(AuthThrottleTest, ZeroMaxFailuresDisablesIt) {
  AuthThrottle throttle({.max_failures = 0, .window = absl::Seconds(10)});
  for (int i = 0; i < 100; ++i) throttle.RecordFailure("p", kStart);
  EXPECT_TRUE(throttle.Check("p", kStart).ok());
}

TEST(AuthThrottleTest, ManyPeersAreSweptOnceTheirWindowPassed) {
  AuthThrottle throttle({.max_failures = 1, .window = absl::Seconds(10)});
  for (int i = 0; i < 5000; ++i) throttle.RecordFailure(std::to_string(i), kStart);
  EXPECT_FALSE(throttle.Check("42", kStart + absl::Seconds(1)).ok());
  // After the window every old peer is forgotten; the sweep runs on the next failure.
  throttle.RecordFailure("new", kStart + absl::Seconds(20));
  EXPECT_TRUE(throttle.Check("42", kStart + absl::Seconds(20)).ok());
  EXPECT_FALSE(throttle.Check("new", kStart + absl::Seconds(20)).ok());
}

TEST(AuthThrottleTest, PeerAddressDropsTheSchemeAndPort) {
  EXPECT_EQ(AuthThrottle::PeerAddress("ipv4:10.1.2.3:45678"), "10.1.2.3");
  EXPECT_EQ(AuthThrottle::PeerAddress("ipv6:[::1]:45678"), "::1");
  EXPECT_EQ(AuthThrottle::PeerAddress("ipv6:[fe80::1%eth0]:1"), "fe80::1%eth0");
  EXPECT_EQ(AuthThrottle::PeerAddress("unix:/run/vramlab.sock"), "unix:/run/vramlab.sock");
}

}  // namespace
}  // namespace vramlab::server
