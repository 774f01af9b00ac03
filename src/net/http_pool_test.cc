#include "net/http_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace arbiter::net {
namespace {

// Tasks that stand for open connections: each holds its thread until released.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int running = 0;
  int done = 0;

  void Hold() {
    std::unique_lock<std::mutex> lock(mu);
    ++running;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
    --running;
    ++done;
    cv.notify_all();
  }
  bool WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return running == n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(ElasticThreadPool, EveryConnectionGetsAThreadUpToTheBound) {
  Gate gate;
  ElasticThreadPool pool(2, 64);
  EXPECT_EQ(pool.threads(), 2u);
  for (int i = 0; i < 40; ++i) pool.enqueue([&] { gate.Hold(); });
  // All 40 are served at once: a fixed pool of 2 would run 2 and leave 38 waiting.
  ASSERT_TRUE(gate.WaitRunning(40));
  EXPECT_EQ(pool.threads(), 40u);
  gate.Open();
  pool.shutdown();
  EXPECT_EQ(gate.done, 40);
}

TEST(ElasticThreadPool, BeyondTheBoundTasksWaitForAThread) {
  Gate gate;
  ElasticThreadPool pool(1, 4);
  for (int i = 0; i < 10; ++i) pool.enqueue([&] { gate.Hold(); });
  ASSERT_TRUE(gate.WaitRunning(4));
  EXPECT_EQ(pool.threads(), 4u);
  gate.Open();
  pool.shutdown();  // runs what was queued before it stops
  EXPECT_EQ(gate.done, 10);
}

TEST(ElasticThreadPool, IdleThreadsAreReused) {
  ElasticThreadPool pool(1, 64);
  std::atomic<int> ran{0};
  for (int i = 0; i < 200; ++i) {
    pool.enqueue([&] { ++ran; });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ran.load() <= i && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  EXPECT_EQ(ran.load(), 200);
  EXPECT_LE(pool.threads(), 8u);  // one at a time: a few threads, never one per task
  pool.shutdown();
}

TEST(ElasticThreadPool, ThreadsOfABurstExitOnceIdleAndTheFloorStays) {
  Gate gate;
  std::atomic<int64_t> gauge{0};
  ElasticThreadPool pool(2, 64, /*idle_exit_ms=*/50, &gauge);
  EXPECT_EQ(gauge.load(), 2);
  for (int i = 0; i < 30; ++i) pool.enqueue([&] { gate.Hold(); });
  ASSERT_TRUE(gate.WaitRunning(30));
  EXPECT_EQ(pool.threads(), 30u);
  EXPECT_EQ(gauge.load(), 30);
  gate.Open();
  // The burst is over: its threads leave after 50 ms idle, down to the two the pool started with.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (pool.threads() > 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(pool.threads(), 2u);
  EXPECT_EQ(gauge.load(), 2);
  // And the pool still serves: a new burst starts threads again.
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i) pool.enqueue([&] { ++ran; });
  pool.shutdown();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ(gauge.load(), 0);
}

}  // namespace
}  // namespace arbiter::net
