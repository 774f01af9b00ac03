// Autoscaling and lending end to end: `arbiter server --gateway-listen` with its built-in node (4
// fake GPUs), a service of arbiter-echo-server replicas scaled by the load the built-in gateway
// reports, and training jobs that borrow the serving queue's idle guarantee:
//   - scale from zero (the request waits in the gateway and is answered), a burst that panics up
//     to the maximum without a failed request, the scale-down after the delay, back to zero;
//   - a borrower slower to stop than the service's reclaim deadline does not get the lent GPUs;
//   - a borrower that checkpoints is preempted when the service scales up, and resumes from its
//     checkpoint once the service scales down again.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string EchoBinary() {
  return (std::filesystem::path(ARBITER_BINARY).parent_path() / "arbiter-echo-server").string();
}

constexpr const char* kConfig = R"(gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: train, value: 10, preemptible: true, min_runtime_seconds: 600, grace_period_seconds: 2}
  - {name: slow-train, value: 10, preemptible: true, grace_period_seconds: 60}
tenants:
  - name: lab
    default_queue: serving
    queues:
      - {name: serving, guaranteed: {gpu: 3}}
      - {name: training, guaranteed: {gpu: 0}}
)";

// Trains in steps of 0.2 s, saving its step in ARBITER_CHECKPOINT_DIR after each (a temporary
// file renamed into place); run again, it says where it resumed.
constexpr const char* kTrainer =
    "d=\"$ARBITER_CHECKPOINT_DIR\"; step=0; "
    "if [ -f \"$d/step\" ]; then step=$(cat \"$d/step\"); echo \"resumed at step $step\"; fi; "
    "trap 'exit 0' TERM; "
    "while [ $step -lt 100000 ]; do step=$((step+1)); echo $step > \"$d/tmp\"; "
    "mv \"$d/tmp\" \"$d/step\"; echo \"step $step\"; sleep 0.2; done";

// Requests from `n` threads, each answered after `delay_ms`, until stopped; counts failures.
class Burst {
 public:
  Burst(int port, int n, int delay_ms) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, port, delay_ms] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(40);
        while (!stop_) {
          auto r = c.Get(fmt::format("/s/chat/work?delay_ms={}", delay_ms));
          ++sent_;
          if (!r || r->status != 200) {
            ++failed_;
            std::lock_guard<std::mutex> lock(mu_);
            last_error_ =
                r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error());
          }
        }
      });
    }
  }
  ~Burst() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int64_t sent() const { return sent_; }
  int64_t failed() const { return failed_; }
  std::string last_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> sent_{0}, failed_{0};
  std::mutex mu_;
  std::string last_error_;
  std::vector<std::thread> threads_;
};

class AutoscalingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    const int ports_lo = 10000 + static_cast<int>(getpid() % 500) * 20;
    ASSERT_TRUE(server_.Start(
        dir_.path(), {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box",
                      "--fake-gpus", "4", "--gateway-listen", "127.0.0.1:0", "--service-ports",
                      fmt::format("{}-{}", ports_lo, ports_lo + 19)}))
        << server_.output();
    const std::string line = "gateway for services listening on http://127.0.0.1:";
    ASSERT_TRUE(server_.WaitForOutput(line, 20)) << server_.output();
    const std::string& out = server_.output();
    gateway_port_ = std::stoi(out.substr(out.find(line) + line.size()));
    admin_ = server_.Client(server_.admin_token());
  }

  json Spec(int min, int max, int reclaim_deadline = 0) {
    json s = {{"name", "chat"},
              {"queue", "serving"},
              {"template", {{"command", {EchoBinary()}}, {"resources", {{"gpus", 1}}}}},
              {"replicas", {{"min", min}, {"max", max}}},
              {"max_concurrency", 2},
              {"readiness",
               {{"path", "/readyz"},
                {"period_seconds", 0.2},
                {"timeout_seconds", 0.2},
                {"failure_threshold", 1}}},
              {"drain_seconds", 1},
              {"autoscaling",
               {{"target", 2},
                {"target_utilization", 100},
                {"stable_window_seconds", 6},
                {"scale_down_delay_seconds", 2},
                {"scale_to_zero_grace_seconds", 1}}}};
    if (reclaim_deadline > 0) s["reclaim_deadline_seconds"] = reclaim_deadline;
    return s;
  }

  json Status() {
    auto r = admin_->Get("/api/v1/services/chat");
    if (!r || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false).value("status", json::object());
  }

  template <typename F>
  bool WaitFor(F ok, int seconds) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      if (ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ok();
  }

  bool HasEvent(const json& status, const std::string& needle) {
    for (const json& e : status.value("events", json::array())) {
      if (e.value("message", "").find(needle) != std::string::npos) return true;
    }
    return false;
  }

  json Job(uint64_t id) {
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id));
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  }

  uint64_t Submit(const json& body) {
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r && r->status == 201 ? json::parse(r->body).value("id", uint64_t{0}) : 0;
  }

  std::string Log(uint64_t id) {
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}/logs", id));
    return r && r->status == 200 ? r->body : "";
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
  int gateway_port_ = 0;
};

TEST_F(AutoscalingTest, FromZeroThroughABurstAndBackToZeroWithoutAFailedRequest) {
  auto created = admin_->Post("/api/v1/services", Spec(0, 3).dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  EXPECT_EQ(Status()["autoscaling"]["desired"], 0);

  // Scale from zero: the gateway holds the request while the first replica starts.
  httplib::Client client("127.0.0.1", gateway_port_);
  client.set_read_timeout(40);
  // (The gateway learns of the new service by its long poll: until then it answers 404.)
  httplib::Result first = client.Get("/s/chat/hello");
  for (int i = 0; i < 100 && first && first->status == 404; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    first = client.Get("/s/chat/hello");
  }
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  ASSERT_TRUE(WaitFor([&] { return Status()["autoscaling"]["cold_start"]["count"] == 1; }, 10))
      << Status().dump();
  EXPECT_TRUE(HasEvent(Status(), "0 -> 1: a request waits and no replica runs"));

  // A burst of 8 at once against replicas that carry 2 each: panic, the maximum of 3.
  {
    Burst burst(gateway_port_, 8, 300);
    EXPECT_TRUE(WaitFor([&] { return Status()["ready"] == 3; }, 30)) << Status().dump();
    const json st = Status();
    EXPECT_TRUE(HasEvent(st, "panic:")) << st.dump();
    EXPECT_GE(st["autoscaling"]["scale_up"]["count"].get<int>(), 1) << st.dump();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    burst.Stop();
    EXPECT_GT(burst.sent(), 8);
    EXPECT_EQ(burst.failed(), 0) << burst.last_error();
  }

  // Quiet: down after the panic's stable window and the scale-down delay, then to zero.
  EXPECT_TRUE(WaitFor([&] { return Status()["autoscaling"]["desired"] == 0; }, 60))
      << Status().dump();
  const json st = Status();
  EXPECT_TRUE(HasEvent(st, "scale to zero")) << st.dump();
  EXPECT_TRUE(WaitFor([&] { return Status()["replicas"].empty(); }, 30)) << Status().dump();
  // And back: the next request is held and answered again.
  auto again = client.Get("/s/chat/hello");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
}

TEST_F(AutoscalingTest, LentGpusGoOnlyToQuickBorrowersAndComeBackFromTheOneThatLosesLeast) {
  auto created = admin_->Post("/api/v1/services", Spec(1, 3, 5).dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  ASSERT_TRUE(WaitFor([&] { return Status()["ready"] == 1; }, 30)) << Status().dump();

  // 4 GPUs: the replica holds 1 of serving's 3, 1 is nobody's. A job that takes 60 s to stop
  // may not borrow serving's 2 idle ones.
  const uint64_t slow = Submit({{"queue", "training"},
                                {"priority_class", "slow-train"},
                                {"command", {"sleep", "600"}},
                                {"resources", {{"gpus", 3}}}});
  EXPECT_TRUE(WaitFor(
      [&] {
        return Job(slow).dump().find("lent only to jobs that stop within 5 s") != std::string::npos;
      },
      10))
      << Job(slow).dump();
  EXPECT_EQ(Job(slow)["state"], "pending");
  ASSERT_EQ(
      admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", slow), "", "application/json")->status,
      200);

  // One that stops within 2 s borrows them, and checkpoints as it trains.
  const uint64_t trainer = Submit({{"queue", "training"},
                                   {"priority_class", "train"},
                                   {"command", {"bash", "-c", kTrainer}},
                                   {"resources", {{"gpus", 3}}}});
  ASSERT_TRUE(WaitFor([&] { return Log(trainer).find("step 5\n") != std::string::npos; }, 30))
      << Job(trainer).dump() << Log(trainer);

  // A burst: the service wants 3, the trainer's GPUs come back (its minimum runtime does not
  // hold against the deadline's terms), and no request fails meanwhile.
  {
    Burst burst(gateway_port_, 8, 300);
    EXPECT_TRUE(WaitFor([&] { return Status()["ready"] == 3; }, 40))
        << Status().dump() << Job(trainer).dump();
    const json st = Status();
    EXPECT_GE(st["autoscaling"]["reclaim"]["count"].get<int>(), 1) << st.dump();
    EXPECT_TRUE(HasEvent(st, "(GPUs reclaimed from borrowers)")) << st.dump();
    EXPECT_GE(Job(trainer)["preemptions"].get<int>(), 1) << Job(trainer).dump();
    burst.Stop();
    EXPECT_EQ(burst.failed(), 0) << burst.last_error();
  }

  // Quiet again: the service goes back to 1 and the trainer resumes from its checkpoint.
  ASSERT_TRUE(
      WaitFor([&] { return Log(trainer).find("resumed at step") != std::string::npos; }, 60))
      << Status().dump() << Job(trainer).dump() << Log(trainer);
  const std::string log = Log(trainer);
  const size_t at = log.find("resumed at step ") + std::string("resumed at step ").size();
  EXPECT_GE(std::stoi(log.substr(at)), 5) << log;
  ASSERT_EQ(
      admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", trainer), "", "application/json")->status,
      200);
}

}  // namespace
}  // namespace arbiter::testing
