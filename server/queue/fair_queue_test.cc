#include "server/queue/fair_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

using ::testing::ElementsAre;
using vramlab::v1::PRIORITY_HIGH;
using vramlab::v1::PRIORITY_LOW;
using vramlab::v1::PRIORITY_UNSPECIFIED;

std::vector<std::string> Drain(FairQueue& queue) {
  std::vector<std::string> order;
  while (auto entry = queue.Pop()) order.push_back(entry->id);
  return order;
}

TEST(FairQueueTest, ColleagueIsNotBlockedByAnotherUsersThirtySubmissions) {
  FairQueue queue;
  for (int i = 0; i < 30; ++i) queue.Push({"a" + std::to_string(i), "alice"});
  queue.Push({"b0", "bob"});
  EXPECT_EQ(queue.Position("b0"), 2);
  EXPECT_EQ(queue.Position("a1"), 3);
  std::vector<std::string> order = Drain(queue);
  ASSERT_EQ(order.size(), 31u);
  EXPECT_EQ(order[0], "a0");
  EXPECT_EQ(order[1], "b0");
  EXPECT_EQ(order[2], "a1");
  EXPECT_EQ(order[30], "a29");
}

TEST(FairQueueTest, RoundRobinAcrossOwnersFifoWithinOwner) {
  FairQueue queue;
  queue.Push({"a1", "alice"});
  queue.Push({"a2", "alice"});
  queue.Push({"a3", "alice"});
  queue.Push({"b1", "bob"});
  queue.Push({"c1", "carol"});
  queue.Push({"b2", "bob"});
  EXPECT_THAT(queue.Order(), ElementsAre("a1", "b1", "c1", "a2", "b2", "a3"));
  EXPECT_THAT(Drain(queue), ElementsAre("a1", "b1", "c1", "a2", "b2", "a3"));
}

TEST(FairQueueTest, OrderPredictsPopsAfterPartialDraining) {
  FairQueue queue;
  for (const char* id : {"a1", "a2", "a3"}) queue.Push({id, "alice"});
  EXPECT_EQ(queue.Pop()->id, "a1");
  queue.Push({"b1", "bob"});  // alice's turn already came: bob goes next
  std::vector<std::string> predicted = queue.Order();
  EXPECT_EQ(predicted, Drain(queue));
  EXPECT_THAT(predicted, ElementsAre("a2", "b1", "a3"));
}

TEST(FairQueueTest, PrioritiesFirstUnspecifiedIsNormal) {
  FairQueue queue;
  queue.Push({"low", "alice", PRIORITY_LOW});
  queue.Push({"normal", "alice", PRIORITY_UNSPECIFIED});
  queue.Push({"high", "bob", PRIORITY_HIGH});
  EXPECT_EQ(queue.CountPriority(vramlab::v1::PRIORITY_NORMAL), 1);
  EXPECT_THAT(Drain(queue), ElementsAre("high", "normal", "low"));
}

TEST(FairQueueTest, RemoveKeepsCountsAndPositionsRight) {
  FairQueue queue;
  queue.Push({"a1", "alice"});
  queue.Push({"a2", "alice"});
  queue.Push({"b1", "bob"});
  queue.Push({"a1", "alice"});  // duplicate id ignored
  EXPECT_EQ(queue.size(), 3);
  EXPECT_EQ(queue.CountOwner("alice"), 2);
  EXPECT_TRUE(queue.Remove("b1"));
  EXPECT_FALSE(queue.Remove("b1"));
  EXPECT_EQ(queue.CountOwner("bob"), 0);
  EXPECT_EQ(queue.Position("a2"), 2);
  EXPECT_TRUE(queue.Remove("a1"));
  EXPECT_EQ(queue.Position("a2"), 1);
  EXPECT_THAT(Drain(queue), ElementsAre("a2"));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.Position("a2"), 0);
}

}  // namespace
}  // namespace vramlab::server
