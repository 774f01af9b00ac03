// Job arrays through the real client and server (docs/cli.md, "Job arrays"): a batch script with
// #SBATCH --array=0-5%2 runs its six elements at most two at once, each with Slurm's array
// variables and its own %A_%a output file; the job commands take the array's id, an element
// (12_3), elements and ranges of job ids; `arbiter scancel` cancels by id and by filters, silently.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "local_node_cli.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

class JobArraysTest : public LocalNodeCliTest {
 protected:
  uint64_t Submit(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"submit", "--parsable"};
    all.insert(all.end(), args.begin(), args.end());
    const CliResult r = Cli(all);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? std::stoull(r.out) : 0;
  }
  json Get(const std::string& path) {
    auto r = server_.Client(token_)->Get(path);
    EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
    return r ? ParseOrNull(r->body) : json();
  }
  std::string State(uint64_t id) { return Get(fmt::format("/api/v1/jobs/{}", id))["state"]; }
  // The states of array `id`'s elements, by job id.
  std::map<uint64_t, std::string> States(uint64_t id) {
    std::map<uint64_t, std::string> out;
    const json list = Get(fmt::format("/api/v1/jobs?array={}", id));
    for (const json& j : list["items"]) {
      out[j["id"].get<uint64_t>()] = j["state"];
    }
    return out;
  }
};

TEST_F(JobArraysTest, AThrottledScriptArrayRunsTwoAtOnceWithSlurmsVariables) {
  WriteFile(work_.path() + "/throttled.sh",
            "#!/bin/sh\n"
            "#SBATCH -p lab-q --array=0-5%2\n"
            "#SBATCH -o %A_%a.out\n"
            "touch running.$SLURM_ARRAY_TASK_ID\n"
            "first=$(ls running.* | wc -l)\n"
            "echo array=$SLURM_ARRAY_JOB_ID task=$SLURM_ARRAY_TASK_ID "
            "count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX "
            "step=$SLURM_ARRAY_TASK_STEP job=$SLURM_JOB_ID name=$SLURM_JOB_NAME\n"
            "sleep 0.5\n"
            "echo at once: $first $(ls running.* | wc -l)\n"
            "rm running.$SLURM_ARRAY_TASK_ID\n");
  const uint64_t a = Submit({"throttled.sh"});
  ASSERT_NE(a, 0u);
  // Never more than two hold resources; the others wait with a verdict that says why.
  bool throttled_seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const json items = Get(fmt::format("/api/v1/jobs?array={}", a))["items"];
    ASSERT_EQ(items.size(), 6u) << items.dump();
    int holding = 0;
    int ended = 0;
    for (const json& j : items) {
      const std::string s = j["state"];
      holding += s == "admitted" || s == "starting" || s == "running" || j.contains("stopping");
      ended += s == "succeeded" || s == "failed";
      if (j.contains("pending") && j["pending"].is_object() &&
          j["pending"]["code"] == "ArrayThrottled") {
        throttled_seen = true;
        // Running, or offered to the scheduler this cycle: two in all.
        const std::string m = j["pending"]["message"];
        EXPECT_TRUE(
            m == fmt::format("array {} runs 2 of at most 2 elements at once (%2)", a) ||
            m == fmt::format("array {} runs 1 of at most 2 elements at once, and its next 1 is "
                             "ahead of this one (%2)",
                             a) ||
            m == fmt::format("array {} runs 0 of at most 2 elements at once, and its next 2 are "
                             "ahead of this one (%2)",
                             a))
            << m;
      }
    }
    EXPECT_LE(holding, 2);
    if (ended == 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(throttled_seen);
  const CliResult wait = Cli({"wait", std::to_string(a), "--timeout", "60"});
  EXPECT_EQ(wait.code, 0) << wait.out << wait.err;
  EXPECT_EQ(wait.out, fmt::format("array {} ended: 6 succeeded\n", a));
  for (int i = 0; i <= 5; ++i) {
    const std::string out = ReadFile(fmt::format("{}/{}_{}.out", work_.path(), a, i));
    EXPECT_TRUE(Contains(out, fmt::format("array={} task={} count=6 min=0 max=5 step=1 job={} "
                                          "name=throttled.sh\n",
                                          a, i, a + i)))
        << out;
    const size_t at = out.find("at once: ");
    ASSERT_NE(at, std::string::npos) << out;
    for (char c : out.substr(at + 9)) {
      if (c >= '0' && c <= '9') {
        EXPECT_LE(c - '0', 2) << out;
      }
    }
  }
}

TEST_F(JobArraysTest, CancelTakesTheArrayAnElementAndARange) {
  const uint64_t a = Submit({"--array", "0-4", "--", "sleep", "60"});
  ASSERT_NE(a, 0u);
  const CliResult one = Cli({"cancel", fmt::format("{}_3", a)});
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_TRUE(Contains(one.out, fmt::format("job {} cancelled", a + 3))) << one.out;
  std::map<uint64_t, std::string> states = States(a);
  EXPECT_EQ(states[a + 3], "cancelled");
  for (uint64_t id : {a, a + 1, a + 2, a + 4}) EXPECT_NE(states[id], "cancelled") << id;
  // One element, shown by its Slurm name; one that is not there.
  EXPECT_EQ(ParseOrNull(Cli({"show", fmt::format("{}_2", a), "-o", "json"}).out)["id"], a + 2);
  const CliResult none = Cli({"cancel", fmt::format("{}_[4,7]", a)});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.err, fmt::format("error: array {} has no element 7 (its indices are 0-4)\n", a));
  EXPECT_EQ(Cli({"cancel", fmt::format("{}_x", a)}).code, 2);
  // The whole array: one request for what is left of it.
  const CliResult all = Cli({"cancel", std::to_string(a)});
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, fmt::format("array {}: 4 jobs cancelled\n", a));
  for (const auto& [id, state] : States(a)) EXPECT_EQ(state, "cancelled") << id;
  const CliResult wait = Cli({"wait", std::to_string(a), "--timeout", "30"});
  EXPECT_EQ(wait.code, 1);
  EXPECT_EQ(wait.out, fmt::format("array {} ended: 5 cancelled\n", a));
  // A range of job ids.
  const uint64_t first = Submit({"--", "sleep", "60"});
  Submit({"--", "sleep", "60"});
  const uint64_t last = Submit({"--", "sleep", "60"});
  ASSERT_EQ(last, first + 2);
  const CliResult range = Cli({"cancel", fmt::format("{}-{}", first, last)});
  EXPECT_EQ(range.code, 0) << range.err;
  for (uint64_t id = first; id <= last; ++id) {
    EXPECT_TRUE(Contains(range.out, fmt::format("job {} cancelled", id))) << range.out;
    EXPECT_EQ(State(id), "cancelled");
  }
}

TEST_F(JobArraysTest, ScancelCancelsByIdAndByFiltersSilently) {
  const uint64_t keep = Submit({"--name", "keep", "--", "sleep", "60"});
  const uint64_t drop = Submit({"--name", "drop", "--", "sleep", "60"});
  const uint64_t drops = Submit({"--name", "drop", "--array", "0-1", "--", "sleep", "60"});
  const CliResult by_name = Cli({"scancel", "-n", "drop"});
  EXPECT_EQ(by_name.code, 0) << by_name.err;
  EXPECT_EQ(by_name.out + by_name.err, "");  // as Slurm's: silent when it succeeds
  EXPECT_EQ(State(drop), "cancelled");
  EXPECT_EQ(State(drops), "cancelled");
  EXPECT_EQ(State(drops + 1), "cancelled");
  EXPECT_NE(State(keep), "cancelled");
  // What Arbiter cannot do is refused, naming the flag.
  const CliResult signal = Cli({"scancel", "--signal=KILL", std::to_string(keep)});
  EXPECT_EQ(signal.code, 2);
  EXPECT_TRUE(Contains(signal.err, "error: scancel --signal is not supported")) << signal.err;
  EXPECT_EQ(Cli({"scancel"}).code, 2);
  EXPECT_NE(State(keep), "cancelled");
  // By user, saying what it did with -v.
  const CliResult by_user = Cli({"scancel", "-u", "ann", "-v"});
  EXPECT_EQ(by_user.code, 0) << by_user.err;
  EXPECT_EQ(by_user.out, "");
  EXPECT_EQ(by_user.err, fmt::format("scancel: cancelled job {}\n", keep));
  EXPECT_EQ(State(keep), "cancelled");
  // Nothing left to match: still silent, still 0.
  const CliResult nothing = Cli({"scancel", "--me", "-t", "PENDING,RUNNING"});
  EXPECT_EQ(nothing.code, 0) << nothing.err;
  EXPECT_EQ(nothing.out + nothing.err, "");
  // A whole array by its id.
  const uint64_t a = Submit({"--array", "0-2", "--", "sleep", "60"});
  const CliResult array = Cli({"scancel", std::to_string(a)});
  EXPECT_EQ(array.code, 0) << array.err;
  EXPECT_EQ(array.out + array.err, "");
  for (const auto& [id, state] : States(a)) EXPECT_EQ(state, "cancelled") << id;
}

}  // namespace
}  // namespace arbiter::testing
