#include "server/auth/auth_throttle.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace vramlab::server {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

absl::Time At(int seconds) { return kStart + absl::Seconds(seconds); }

// What the service does with one call presenting a wrong token: true when it was let through to
// the token check (and so failed), false when refused.
bool Guess(AuthThrottle& throttle, const std::string& peer, absl::Time now) {
  if (!throttle.Check(peer, now).ok()) return false;
  throttle.RecordFailure(peer, now);
  return true;
}

TEST(AuthThrottleTest, RefusesAPeerAfterMaxFailuresUntilTheOldestLeavesTheWindow) {
  AuthThrottle throttle({.max_failures = 3, .window = absl::Seconds(60)});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Guess(throttle, "10.0.0.1", At(i)));
  const absl::Status refused = throttle.Check("10.0.0.1", At(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.message(), "from this address")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry in 50s")) << refused;
  // Still refused just before the first failure is a window old, let in at that moment.
  EXPECT_FALSE(throttle.Check("10.0.0.1", At(59)).ok());
  EXPECT_TRUE(throttle.Check("10.0.0.1", At(60)).ok());
  // One more failure fills the window again (failures at 1, 2 and 60) until the one at 1 leaves.
  throttle.RecordFailure("10.0.0.1", At(60));
  EXPECT_FALSE(throttle.Check("10.0.0.1", At(60)).ok());
  EXPECT_TRUE(throttle.Check("10.0.0.1", At(61)).ok());
}

TEST(AuthThrottleTest, AnotherAddressIsServedWhileOneIsThrottled) {
  AuthThrottle throttle({.max_failures = 2, .max_failures_total = 10});
  EXPECT_TRUE(Guess(throttle, "10.0.0.1", At(0)));
  EXPECT_TRUE(Guess(throttle, "10.0.0.1", At(0)));
  EXPECT_FALSE(throttle.Check("10.0.0.1", At(1)).ok());
  // Never seen, not proven, the global budget not spent: served.
  EXPECT_TRUE(throttle.Check("10.0.0.2", At(1)).ok());
}

TEST(AuthThrottleTest, FailuresSpreadOverMoreThanAWindowNeverLockOut) {
  AuthThrottle throttle({.max_failures = 2, .max_failures_total = 2, .window = absl::Seconds(10)});
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(Guess(throttle, "p", At(11 * i))) << i;
}

TEST(AuthThrottleTest, ZeroDisablesEachBudget) {
  AuthThrottle neither({.max_failures = 0, .max_failures_total = 0});
  for (int i = 0; i < 1000; ++i) neither.RecordFailure("p", kStart);
  EXPECT_TRUE(neither.Check("p", kStart).ok());

  AuthThrottle global_only({.max_failures = 0, .max_failures_total = 5});
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Guess(global_only, "p", kStart));
  EXPECT_FALSE(global_only.Check("p", kStart).ok());

  AuthThrottle per_address_only({.max_failures = 5, .max_failures_total = 0});
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(Guess(per_address_only, absl::StrCat("10.0.", i / 256, ".", i % 256), kStart));
  }
}

// The finding this budget answers: one guess each from 60 rotating addresses was 60 guesses.
TEST(AuthThrottleTest, RotatingAddressesShareTheGlobalBudget) {
  AuthThrottle throttle({.max_failures = 10, .max_failures_total = 8, .window = absl::Seconds(60)});
  int let_through = 0;
  for (int i = 0; i < 60; ++i) {
    let_through += Guess(throttle, absl::StrCat("127.0.0.", i + 2), At(i)) ? 1 : 0;
  }
  EXPECT_EQ(let_through, 8);
  const absl::Status refused = throttle.Check("127.0.0.200", At(59));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.message(),
                                "too many failed authentications from all addresses (8 within 1m)"))
      << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry in 1s")) << refused;
  // The budget is per window: once the oldest failure is a window old, one more guess goes in.
  EXPECT_TRUE(Guess(throttle, "127.0.0.201", At(60)));
  EXPECT_FALSE(throttle.Check("127.0.0.202", At(60)).ok());
}

TEST(AuthThrottleTest, ProvenAddressesAreServedWhileTheGlobalBudgetIsSpent) {
  AuthThrottle throttle({.max_failures = 3,
                         .max_failures_total = 4,
                         .window = absl::Seconds(60),
                         .proven_for = absl::Hours(1)});
  throttle.RecordSuccess("10.0.0.7", At(0));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Guess(throttle, absl::StrCat("10.9.0.", i), At(1)));
  EXPECT_FALSE(throttle.Check("10.0.0.8", At(2)).ok());
  EXPECT_TRUE(throttle.Check("10.0.0.7", At(2)).ok());
  // A proven address is still held to its own budget.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Guess(throttle, "10.0.0.7", At(3)));
  const absl::Status own = throttle.Check("10.0.0.7", At(4));
  EXPECT_TRUE(absl::StrContains(own.message(), "from this address")) << own;
}

TEST(AuthThrottleTest, ProofExpiresAfterProvenFor) {
  AuthThrottle throttle({.max_failures = 3,
                         .max_failures_total = 1,
                         .window = absl::Seconds(60),
                         .proven_for = absl::Hours(1)});
  throttle.RecordSuccess("10.0.0.7", At(0));
  EXPECT_TRUE(Guess(throttle, "10.9.0.1", At(3599)));
  EXPECT_TRUE(throttle.Check("10.0.0.7", At(3599)).ok());
  EXPECT_FALSE(throttle.Check("10.0.0.7", At(3600)).ok());
  // A new success renews the proof.
  throttle.RecordSuccess("10.0.0.7", At(3500));
  EXPECT_TRUE(throttle.Check("10.0.0.7", At(3600)).ok());
}

TEST(AuthThrottleTest, TrackedAddressesAreCappedForgettingTheOldestFirst) {
  AuthThrottle throttle({.max_failures = 1,
                         .max_failures_total = 0,
                         .window = absl::Seconds(60),
                         .max_tracked_addresses = 3});
  EXPECT_TRUE(Guess(throttle, "a", At(0)));
  EXPECT_TRUE(Guess(throttle, "b", At(1)));
  EXPECT_TRUE(Guess(throttle, "c", At(2)));
  EXPECT_TRUE(Guess(throttle, "d", At(3)));  // forgets "a", whose latest failure is oldest
  EXPECT_TRUE(throttle.Check("a", At(4)).ok());
  for (const char* peer : {"b", "c", "d"}) EXPECT_FALSE(throttle.Check(peer, At(4)).ok()) << peer;
  // Addresses without failures in the window go first: "b"'s failure leaves it at 61.
  EXPECT_TRUE(Guess(throttle, "e", At(61)));
  EXPECT_TRUE(throttle.Check("b", At(61)).ok());
  for (const char* peer : {"c", "d", "e"}) EXPECT_FALSE(throttle.Check(peer, At(61)).ok()) << peer;
}

TEST(AuthThrottleTest, ProvenAddressesAreCappedForgettingTheLeastRecentlyProven) {
  AuthThrottle throttle({.max_failures = 0,
                         .max_failures_total = 1,
                         .window = absl::Seconds(60),
                         .max_proven_addresses = 2});
  throttle.RecordSuccess("a", At(0));
  throttle.RecordSuccess("b", At(1));
  throttle.RecordSuccess("a", At(2));
  throttle.RecordSuccess("c", At(3));  // forgets "b"
  EXPECT_TRUE(Guess(throttle, "x", At(4)));
  EXPECT_TRUE(throttle.Check("a", At(5)).ok());
  EXPECT_FALSE(throttle.Check("b", At(5)).ok());
  EXPECT_TRUE(throttle.Check("c", At(5)).ok());
}

TEST(AuthThrottleTest, PeerAddressDropsTheSchemeAndPort) {
  EXPECT_EQ(AuthThrottle::PeerAddress("ipv4:10.1.2.3:45678"), "10.1.2.3");
  EXPECT_EQ(AuthThrottle::PeerAddress("ipv6:[::1]:45678"), "::1");
  EXPECT_EQ(AuthThrottle::PeerAddress("ipv6:[fe80::1%eth0]:1"), "fe80::1%eth0");
  EXPECT_EQ(AuthThrottle::PeerAddress("unix:/run/vramlab.sock"), "unix:/run/vramlab.sock");
}

}  // namespace
}  // namespace vramlab::server
