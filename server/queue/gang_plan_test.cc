#include "server/queue/gang_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

GangPlanCandidate Job(const std::string& id, int slots, int minutes) {
  return {id, slots, absl::Minutes(minutes)};
}

GangPlanRunning Holding(int slots, int minutes_left) {
  return {slots, kNow + absl::Minutes(minutes_left)};
}

TEST(GangPlanTest, StartsInQueueOrderWhileTheyFit) {
  GangPlanResult plan =
      PlanGangStarts(4, 4, {}, {Job("a", 2, 10), Job("b", 1, 10), Job("c", 1, 10)}, kNow);
  EXPECT_THAT(plan.start, ElementsAre("a", "b", "c"));
  EXPECT_FALSE(plan.reservation.has_value());
}

TEST(GangPlanTest, WiderThanTheFreeSlotsWaitsWithAReservation) {
  // Two of four slots busy for 30 and 60 minutes: a job of four waits for both.
  GangPlanResult plan =
      PlanGangStarts(4, 2, {Holding(1, 30), Holding(1, 60)}, {Job("big", 4, 10)}, kNow);
  EXPECT_THAT(plan.start, IsEmpty());
  ASSERT_TRUE(plan.reservation.has_value());
  EXPECT_EQ(plan.reservation->id, "big");
  EXPECT_EQ(plan.reservation->start, kNow + absl::Minutes(60));
  EXPECT_EQ(plan.reservation->spare, 0);
}

TEST(GangPlanTest, ReservationIsTheEarliestTimeEnoughSlotsAreFree) {
  // Needs 3 of 4; one free, the others end at 10, 20 and 90 minutes: the second frees enough.
  GangPlanResult plan = PlanGangStarts(4, 1, {Holding(1, 90), Holding(1, 10), Holding(1, 20)},
                                       {Job("big", 3, 5)}, kNow);
  ASSERT_TRUE(plan.reservation.has_value());
  EXPECT_EQ(plan.reservation->start, kNow + absl::Minutes(20));
  EXPECT_EQ(plan.reservation->spare, 0);
}

TEST(GangPlanTest, BackfillsAJobThatEndsBeforeTheReservation) {
  // Slot 0 busy for 60 minutes, slot 1 free; the big job needs both. A 30-minute job on the
  // free slot ends before the big one could start, so it runs now.
  GangPlanResult plan =
      PlanGangStarts(2, 1, {Holding(1, 60)}, {Job("big", 2, 10), Job("short", 1, 30)}, kNow);
  EXPECT_THAT(plan.start, ElementsAre("short"));
  ASSERT_TRUE(plan.reservation.has_value());
  EXPECT_EQ(plan.reservation->start, kNow + absl::Minutes(60));
}

TEST(GangPlanTest, NoBackfillThatWouldDelayTheReservation) {
  // The same, but the small job may run 90 minutes: it would hold a slot the big one needs at 60.
  GangPlanResult plan =
      PlanGangStarts(2, 1, {Holding(1, 60)}, {Job("big", 2, 10), Job("long", 1, 90)}, kNow);
  EXPECT_THAT(plan.start, IsEmpty());
  ASSERT_TRUE(plan.reservation.has_value());
  EXPECT_EQ(plan.reservation->id, "big");
}

TEST(GangPlanTest, BackfillsIntoSlotsTheReservationDoesNotNeed) {
  // Four slots, one busy for 60 minutes; the head needs all four. Nothing may use the three
  // free ones beyond 60 minutes. With a head of three, one slot is spare at 60 minutes: one long
  // job may take it, a second may not.
  GangPlanResult four =
      PlanGangStarts(4, 3, {Holding(1, 60)}, {Job("big", 4, 10), Job("long", 1, 600)}, kNow);
  EXPECT_THAT(four.start, IsEmpty());
  GangPlanResult three =
      PlanGangStarts(4, 2, {Holding(2, 60)},
                     {Job("big", 3, 10), Job("long1", 1, 600), Job("long2", 1, 600)}, kNow);
  ASSERT_TRUE(three.reservation.has_value());
  EXPECT_EQ(three.reservation->spare, 1);
  EXPECT_THAT(three.start, ElementsAre("long1"));
}

TEST(GangPlanTest, LaterJobsSkipOneThatDoesNotFitTheFreeSlots) {
  // After the reservation, a candidate wider than the free slots is passed over, and a narrower
  // one behind it may still backfill.
  GangPlanResult plan = PlanGangStarts(
      4, 2, {Holding(2, 60)},
      {Job("big", 4, 10), Job("pair-long", 2, 600), Job("triple", 3, 1), Job("one", 1, 30)}, kNow);
  EXPECT_THAT(plan.start, ElementsAre("one"));
}

TEST(GangPlanTest, AStreamOfSmallJobsDoesNotStarveABigOne) {
  // Two slots. A job of two waits behind a running one-slot job. Every minute a new one-slot
  // job of 10 minutes arrives behind it. Without a reservation each would take the free slot
  // and the big job would never find both free; with it, none may start unless it ends before
  // the big one's start, and the big job starts when the running one ends.
  absl::Time now = kNow;
  std::vector<GangPlanRunning> running = {{1, kNow + absl::Minutes(5)}};
  int free = 1;
  std::vector<GangPlanCandidate> queue = {Job("big", 2, 10)};
  bool big_started = false;
  for (int minute = 0; minute < 30 && !big_started; ++minute) {
    now = kNow + absl::Minutes(minute);
    // Running jobs past their bound have ended.
    for (auto it = running.begin(); it != running.end();) {
      if (it->end_bound <= now) {
        free += it->slots;
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    queue.push_back(Job("small-" + std::to_string(minute), 1, 10));
    GangPlanResult plan = PlanGangStarts(2, free, running, queue, now);
    for (const std::string& id : plan.start) {
      auto job = std::find_if(queue.begin(), queue.end(),
                              [&](const GangPlanCandidate& c) { return c.id == id; });
      ASSERT_NE(job, queue.end());
      if (id == "big") big_started = true;
      free -= job->slots;
      running.push_back({job->slots, now + job->max_duration});
      queue.erase(job);
    }
    ASSERT_GE(free, 0);
  }
  EXPECT_TRUE(big_started);
  EXPECT_EQ(now, kNow + absl::Minutes(5));
}

TEST(GangPlanTest, ABigJobIsNotStartedAheadOfItsTurnButWaitsInIt) {
  // The big job is second in the queue: the first, which fits, starts first.
  GangPlanResult plan = PlanGangStarts(2, 2, {}, {Job("small", 1, 10), Job("big", 2, 10)}, kNow);
  EXPECT_THAT(plan.start, ElementsAre("small"));
  ASSERT_TRUE(plan.reservation.has_value());
  EXPECT_EQ(plan.reservation->id, "big");
  EXPECT_EQ(plan.reservation->start, kNow + absl::Minutes(10));
}

TEST(GangPlanTest, AJobWiderThanTheHostIsPassedOver) {
  GangPlanResult plan = PlanGangStarts(2, 2, {}, {Job("huge", 3, 10), Job("a", 1, 10)}, kNow);
  EXPECT_THAT(plan.start, ElementsAre("a"));
  EXPECT_FALSE(plan.reservation.has_value());
}

}  // namespace
}  // namespace vramlab::server
