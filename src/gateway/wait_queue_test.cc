#include "gateway/wait_queue.h"

#include <gtest/gtest.h>

namespace arbiter::gateway {
namespace {

struct TestWaiter : Waiter {
  explicit TestWaiter(int i) : id(i) {}
  void Wake(std::shared_ptr<Waiter>) override { ++wakes; }
  int id;
  int wakes = 0;
};

int IdOf(const std::shared_ptr<Waiter>& w) {
  return w ? static_cast<TestWaiter*>(w.get())->id : -1;
}

TEST(WaitQueueTest, HoldsAtMostMax) {
  WaitQueue q;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(q.Push(std::make_shared<TestWaiter>(i), 3));
  EXPECT_FALSE(q.Push(std::make_shared<TestWaiter>(3), 3));
  EXPECT_EQ(q.size(), 3);
  EXPECT_FALSE(q.Push(std::make_shared<TestWaiter>(4), 0)) << "max 0: nothing waits";
}

TEST(WaitQueueTest, OldestFirstAndPutBackAtTheHead) {
  WaitQueue q;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Push(std::make_shared<TestWaiter>(i), 10));
  std::shared_ptr<Waiter> first = q.Pop();
  EXPECT_EQ(IdOf(first), 0);
  q.PushFront(first);  // woken, found no replica: keeps its place
  EXPECT_EQ(IdOf(q.Pop()), 0);
  EXPECT_EQ(IdOf(q.Pop()), 1);
  EXPECT_EQ(IdOf(q.Pop()), 2);
  EXPECT_EQ(q.Pop(), nullptr);
  EXPECT_EQ(q.size(), 0);
}

TEST(WaitQueueTest, RemoveTakesOutOnlyWhatStillWaits) {
  WaitQueue q;
  auto a = std::make_shared<TestWaiter>(1);
  auto b = std::make_shared<TestWaiter>(2);
  ASSERT_TRUE(q.Push(a, 10));
  ASSERT_TRUE(q.Push(b, 10));
  EXPECT_TRUE(q.Remove(b.get()));
  EXPECT_FALSE(q.Remove(b.get())) << "already out";
  std::shared_ptr<Waiter> popped = q.Pop();
  EXPECT_EQ(IdOf(popped), 1);
  EXPECT_FALSE(q.Remove(a.get())) << "popped: its wake is on its way";
  EXPECT_EQ(q.size(), 0);
}

TEST(WaitQueueTest, TakeAllEmptiesInOrder) {
  WaitQueue q;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Push(std::make_shared<TestWaiter>(i), 10));
  auto all = q.TakeAll();
  ASSERT_EQ(all.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(IdOf(all[static_cast<size_t>(i)]), i);
  EXPECT_EQ(q.size(), 0);
  EXPECT_TRUE(q.Push(all[0], 1)) << "a taken waiter may wait again";
}

}  // namespace
}  // namespace arbiter::gateway
