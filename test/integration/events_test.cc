// The server-sent event stream (GET /api/v1/events): a job's events reach its tenant's streams
// and admins', never another tenant's, also when replayed with since=SEQ.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Event {
  uint64_t id = 0;
  std::string kind;
  json data;
};

// One stream, read on its own thread until Stop() or 30 s. The server sends a keep-alive comment
// at least every second, so the reader sees the stop request within about a second.
class EventStream {
 public:
  EventStream(const ServerProcess& server, const std::string& token, std::string query = "")
      : client_(server.Client(token)) {
    client_->set_read_timeout(5);
    thread_ = std::thread([this, query] {
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      client_->Get(
          "/api/v1/events" + query, httplib::Headers{},
          [this](const httplib::Response& res) {
            std::lock_guard<std::mutex> lock(mu_);
            status_ = res.status;
            cv_.notify_all();
            return res.status == 200;
          },
          [this, deadline](const char* data, size_t n) {
            std::lock_guard<std::mutex> lock(mu_);
            buffer_.append(data, n);
            for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
              Parse(buffer_.substr(0, end));
              buffer_.erase(0, end + 2);
            }
            cv_.notify_all();
            return !stop_ && Clock::now() < deadline;
          });
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~EventStream() {
    RequestStop();
    thread_.join();
  }

  // Asks the reader to hang up at its next chunk (streams stop in parallel, not one by one).
  void RequestStop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }

  // The response status once the headers are in (bounded; -1: none within 10 s).
  int WaitStatus() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return status_ != -1 || ended_; });
    return status_;
  }

  // Waits (up to 10 s) for a job event of job `id`; returns it, or an event with id 0.
  Event WaitForJob(uint64_t job) {
    std::unique_lock<std::mutex> lock(mu_);
    Event found;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      for (const Event& e : events_) {
        if (e.kind == "job" && e.data.value("id", uint64_t{0}) == job) {
          found = e;
          return true;
        }
      }
      return ended_;
    });
    return found;
  }

  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  // One event: "id: N", "event: KIND", "data: JSON" lines; comments (": keep-alive") skipped.
  void Parse(const std::string& block) {
    Event e;
    size_t start = 0;
    while (start < block.size()) {
      size_t eol = block.find('\n', start);
      if (eol == std::string::npos) eol = block.size();
      const std::string line = block.substr(start, eol - start);
      start = eol + 1;
      if (line.rfind("id: ", 0) == 0) e.id = std::stoull(line.substr(4));
      if (line.rfind("event: ", 0) == 0) e.kind = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data = json::parse(line.substr(6), nullptr, false);
    }
    if (!e.kind.empty()) events_.push_back(std::move(e));
  }

  std::unique_ptr<httplib::Client> client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = -1;
  bool stop_ = false;
  bool ended_ = false;
  std::string buffer_;
  std::vector<Event> events_;
};

class EventsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start({}, {"alice", "vic", "sam", "node"})); }
  TenantServer server_;
};

TEST_F(EventsTest, JobEventsReachTheirTenantOnly) {
  EventStream admin(server_.process(), server_.token("admin"));
  EventStream alice(server_.process(), server_.token("alice"));
  EventStream vic(server_.process(), server_.token("vic"));
  EventStream sam(server_.process(), server_.token("sam"));
  for (EventStream* s : {&admin, &alice, &vic, &sam}) ASSERT_EQ(s->WaitStatus(), 200);

  const uint64_t job = server_.Submit("alice");
  ASSERT_NE(job, 0u);
  const Event e = alice.WaitForJob(job);
  ASSERT_EQ(e.data.value("id", uint64_t{0}), job) << "alice's stream never saw job " << job;
  EXPECT_EQ(e.data["tenant"], "vision");
  EXPECT_EQ(e.data["to"], "pending");
  EXPECT_EQ(e.data["reason"], "submitted");
  EXPECT_GT(e.id, 0u);
  EXPECT_EQ(vic.WaitForJob(job).id, e.id);
  EXPECT_EQ(admin.WaitForJob(job).id, e.id);

  // The stream is in order: once sam's own later job is in, alice's would have been before it.
  const uint64_t own = server_.Submit("sam", "speech-train");
  const Event mine = sam.WaitForJob(own);
  ASSERT_EQ(mine.data.value("id", uint64_t{0}), own);
  EXPECT_EQ(mine.data["tenant"], "speech");
  EXPECT_GT(mine.id, e.id);
  for (const Event& ev : sam.events()) {
    EXPECT_NE(ev.data.value("tenant", ""), "vision") << ev.data.dump();
    if (ev.kind == "job") {
      EXPECT_NE(ev.data.value("id", uint64_t{0}), job) << ev.data.dump();
    }
  }
  // And vision's streams do not see sam's job.
  EXPECT_EQ(admin.WaitForJob(own).id, mine.id);
  for (const Event& ev : alice.events()) EXPECT_NE(ev.data.value("tenant", ""), "speech");

  // Replay: since=SEQ resends what came after it, filtered the same way.
  EventStream replay(server_.process(), server_.token("alice"), fmt::format("?since={}", e.id - 1));
  EXPECT_EQ(replay.WaitForJob(job).id, e.id);
  EventStream foreign_replay(server_.process(), server_.token("sam"),
                             fmt::format("?since={}", e.id - 1));
  EXPECT_EQ(foreign_replay.WaitForJob(own).id, mine.id);
  for (const Event& ev : foreign_replay.events()) {
    EXPECT_NE(ev.data.value("tenant", ""), "vision") << ev.data.dump();
  }
  for (EventStream* s : {&admin, &alice, &vic, &sam, &replay, &foreign_replay}) s->RequestStop();
}

TEST_F(EventsTest, StreamNeedsAUserToken) {
  EventStream none(server_.process(), "");
  EXPECT_EQ(none.WaitStatus(), 401);
  EventStream node(server_.process(), server_.token("node"));
  EXPECT_EQ(node.WaitStatus(), 403);
}

}  // namespace
}  // namespace arbiter::testing
