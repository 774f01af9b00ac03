// The views a Slurm user reads, against the real server and client: `arbiter jobs`' defaults,
// squeue, sinfo and sacct in Slurm's columns and formats, filter values the caller cannot see,
// job arrays as one row, and the Slurm command names (a link named squeue; `make install`).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "cli_process.h"
#include "cli_text.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    default_queue: vision-dev
    queues:
      - {name: vision-train, guaranteed: {gpu: 4}, max: {gpu: 4}}
      - {name: vision-dev, guaranteed: {gpu: 0}}
  - name: speech
    queues:
      - {name: speech-train, guaranteed: {gpu: 0}}
users:
  - {name: alice, tenant: vision, role: member, run_as: {uid: 4242}}
  - {name: bob, tenant: vision, role: member, run_as: {uid: 4244}}
  - {name: sam, tenant: speech, role: member, run_as: {uid: 4245}}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 131072, gpus: {count: 8, model: A100-80G}}
)";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string w; s >> w;) out.push_back(w);
  return out;
}

std::set<std::string> LineSet(const std::string& text) {
  const auto lines = Lines(text);
  return {lines.begin(), lines.end()};
}

class SlurmViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(data_.path() + "/cluster.yaml", kConfig);
    ASSERT_TRUE(server_.Start(data_.path(),
                              {"--config", data_.path() + "/cluster.yaml", "--local-node", "box"}))
        << server_.output();
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
    auto admin = server_.Client(server_.admin_token());
    for (const char* user : {"alice", "bob", "sam"}) {
      auto t = admin->Post("/api/v1/tokens", json{{"user", user}}.dump(), "application/json");
      ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
      tokens_[user] = json::parse(t->body)["token"].get<std::string>();
    }
  }

  CliOptions Options(const std::string& user) {
    CliOptions o;
    o.env["HOME"] = home_.path();
    o.env["ARBITER_SERVER"] = url_;
    o.env["ARBITER_TOKEN"] = user == "admin" ? server_.admin_token() : tokens_.at(user);
    o.cwd = work_.path();
    return o;
  }

  CliResult As(const std::string& user, const std::vector<std::string>& args) {
    return RunCli(args, Options(user));
  }

  std::string Id(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--parsable"});
    const CliResult r = As(user, args);
    EXPECT_EQ(r.code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  }

  json Job(const std::string& id) {
    return ParseOrNull(As("admin", {"show", id, "-o", "json"}).out);
  }

  // Bounded poll (50 ms apart) until `done(job)` holds.
  bool WaitFor(const std::string& id, const std::function<bool(const json&)>& done,
               int polls = 300) {
    for (int i = 0; i < polls; ++i) {
      if (done(Job(id))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  bool WaitState(const std::string& id, const std::string& state) {
    return WaitFor(id, [&](const json& j) { return j.value("state", "") == state; });
  }

  // The ids a listing printed, one per line (-h -o %i and the like).
  std::set<std::string> Ids(const std::string& user, std::vector<std::string> args) {
    const CliResult r = As(user, args);
    EXPECT_EQ(r.code, 0) << r.err;
    return LineSet(r.out);
  }

  // The first column of `arbiter jobs`' rows.
  std::set<std::string> JobIds(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), "jobs");
    const CliResult r = As(user, args);
    EXPECT_EQ(r.code, 0) << r.err;
    std::set<std::string> ids;
    const auto lines = Lines(r.out);
    for (size_t i = 1; i < lines.size(); ++i) ids.insert(Words(lines[i]).at(0));
    return ids;
  }

  TempDir data_;
  TempDir home_;
  TempDir work_;
  ServerProcess server_;
  std::string url_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(SlurmViewsTest, JobsListsYourLiveJobsByDefault) {
  const std::string mine = Id("alice", {"--queue", "vision-dev", "--gpus", "1", "--name", "long",
                                        "--walltime", "1h", "--", "sleep", "300"});
  const std::string done = Id("alice", {"--queue", "vision-dev", "--name", "quick", "--", "true"});
  const std::string bobs =
      Id("bob", {"--queue", "vision-dev", "--gpus", "1", "--name", "bobs", "--", "sleep", "300"});
  ASSERT_TRUE(WaitState(mine, "running"));
  ASSERT_TRUE(WaitState(done, "succeeded"));
  ASSERT_TRUE(WaitState(bobs, "running"));

  // The caller's jobs that have not ended, in squeue's columns.
  const CliResult table = As("alice", {"jobs"});
  ASSERT_EQ(table.code, 0) << table.err;
  const auto lines = Lines(table.out);
  ASSERT_EQ(lines.size(), 2u) << table.out;
  EXPECT_EQ(Words(lines[0]),
            (std::vector<std::string>{"ID", "NAME", "QUEUE", "USER", "STATE", "TIME", "LIMIT",
                                      "NODES", "GPUS", "NODELIST(REASON)"}))
      << table.out;
  const auto row = Words(lines[1]);
  ASSERT_EQ(row.size(), 10u) << lines[1];
  EXPECT_EQ(row[0], mine);
  EXPECT_EQ(row[1], "long");
  EXPECT_EQ(row[3], "alice");
  EXPECT_EQ(row[4], "running");
  EXPECT_TRUE(std::regex_match(row[5], std::regex("[0-9]+:[0-5][0-9]"))) << row[5];
  EXPECT_EQ(row[6], "1:00:00");
  EXPECT_EQ(row[7], "1");
  EXPECT_EQ(row[8], "1");
  EXPECT_EQ(row[9], "box");

  // What lifts the defaults: --all both, --user/--queue "own", --state "not ended".
  EXPECT_EQ(JobIds("alice", {"--all"}), (std::set<std::string>{mine, done, bobs}));
  EXPECT_EQ(JobIds("alice", {"--user", "bob"}), (std::set<std::string>{bobs}));
  EXPECT_EQ(JobIds("alice", {"--queue", "vision-dev"}), (std::set<std::string>{mine, bobs}));
  EXPECT_EQ(JobIds("alice", {"--state", "succeeded"}), (std::set<std::string>{done}));
  EXPECT_EQ(JobIds("alice", {"--state", "succeeded,running"}), (std::set<std::string>{mine, done}));
  EXPECT_EQ(JobIds("alice", {"--all", "--mine"}), (std::set<std::string>{mine, done}));
  EXPECT_EQ(JobIds("alice", {"--all", "--active"}), (std::set<std::string>{mine, bobs}));
  const json list = ParseOrNull(As("alice", {"jobs", "-o", "json"}).out);
  ASSERT_EQ(list["items"].size(), 1u) << list;
  EXPECT_EQ(std::to_string(list["items"][0]["id"].get<uint64_t>()), mine);
  const CliResult ended = As("alice", {"jobs", "--all", "-o", "wide"});
  EXPECT_TRUE(Contains(ended.out, "(all tasks exited 0)")) << ended.out;
  EXPECT_TRUE(Contains(ended.out, "TENANT  TYPE")) << ended.out;

  EXPECT_EQ(As("alice", {"jobs", "--mine", "--user", "bob"}).code, 2);
  // Nothing of one's own: a hint, on stderr.
  const CliResult none = As("admin", {"jobs"});
  EXPECT_EQ(none.code, 0);
  EXPECT_EQ(none.out, "");
  EXPECT_TRUE(Contains(none.err, "no jobs of yours are running or waiting")) << none.err;
  EXPECT_EQ(As("sam", {"jobs", "--all"}).err, "no jobs match\n");
}

TEST_F(SlurmViewsTest, UnknownFilterValuesNameWhatTheCallerMaySee) {
  const CliResult queue = As("alice", {"jobs", "--queue", "nosuch"});
  EXPECT_EQ(queue.code, 1);
  EXPECT_EQ(queue.err,
            "error: queue nosuch not found; queues you can see: vision-dev, "
            "vision-train\n");
  // Another tenant's queue reads exactly as one that does not exist.
  const CliResult other = As("alice", {"jobs", "--queue", "speech-train"});
  EXPECT_EQ(other.code, 1);
  EXPECT_EQ(other.err,
            "error: queue speech-train not found; queues you can see: vision-dev, "
            "vision-train\n");
  auto alice = server_.Client(tokens_["alice"]);
  auto a = alice->Get("/api/v1/jobs?queue=speech-train");
  auto b = alice->Get("/api/v1/jobs?queue=no-such-queue");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, 400);
  EXPECT_EQ(b->status, 400);
  const json ea = json::parse(a->body)["error"];
  const json eb = json::parse(b->body)["error"];
  EXPECT_EQ(ea["field"], "queue");
  EXPECT_EQ(std::regex_replace(ea["message"].get<std::string>(), std::regex("speech-train"), "Q"),
            std::regex_replace(eb["message"].get<std::string>(), std::regex("no-such-queue"), "Q"));
  // Names as submissions take them; lists; the other filters.
  EXPECT_EQ(As("alice", {"jobs", "--queue", "VISION-DEV"}).code, 0);
  EXPECT_EQ(As("alice", {"jobs", "--queue", "vision-dev,vision-train"}).code, 0);
  const CliResult tenant = As("alice", {"jobs", "--tenant", "speech"});
  EXPECT_EQ(tenant.code, 1);
  EXPECT_EQ(tenant.err, "error: tenant speech not found; tenants you can see: vision\n");
  const CliResult user = As("alice", {"jobs", "--user", "nobody"});
  EXPECT_EQ(user.code, 1);
  EXPECT_EQ(user.err, "error: user nobody not found; users you can see: alice, bob\n");
  const CliResult state = As("alice", {"jobs", "--state", "runing"});
  EXPECT_EQ(state.code, 1);
  EXPECT_TRUE(Contains(
      state.err, "unknown state 'runing'; states: admitted, awaiting_approval, cancelled, failed"))
      << state.err;
  EXPECT_EQ(alice->Get("/api/v1/jobs?since=yesterday")->status, 400);
  EXPECT_EQ(alice->Get("/api/v1/jobs?active=1")->status, 400);
  // Admins see every tenant's.
  EXPECT_EQ(As("admin", {"jobs", "--queue", "speech-train"}).code, 0);
  // The Slurm views say the same.
  const CliResult squeue = As("alice", {"squeue", "-p", "nosuch"});
  EXPECT_EQ(squeue.code, 1);
  EXPECT_TRUE(Contains(squeue.err, "queue nosuch not found; queues you can see")) << squeue.err;
  const CliResult sinfo = As("alice", {"sinfo", "-p", "nosuch"});
  EXPECT_EQ(sinfo.code, 1);
  EXPECT_EQ(sinfo.err,
            "error: partition nosuch not found; partitions you can see: vision-train, "
            "vision-dev\n");
  const CliResult sacct = As("alice", {"sacct", "-u", "sam"});
  EXPECT_EQ(sacct.code, 1);
  EXPECT_TRUE(Contains(sacct.err, "user sam not found")) << sacct.err;
}

TEST_F(SlurmViewsTest, SqueueColumnsFormatsAndFilters) {
  const std::string run = Id("alice", {"--queue", "vision-train", "--gpus", "4", "--name",
                                       "trainer", "--", "sleep", "300"});
  ASSERT_TRUE(WaitState(run, "running"));
  const std::string wait = Id("alice", {"--queue", "vision-train", "--gpus", "2", "--name",
                                        "waiter", "--", "sleep", "300"});
  ASSERT_TRUE(WaitFor(wait, [](const json& j) {
    return j.value("pending", json::object()).value("code", "") == "QuotaExceeded";
  })) << Job(wait);
  const std::string bobs =
      Id("bob", {"--queue", "vision-dev", "--gpus", "1", "--name", "bobjob", "--", "sleep", "300"});
  ASSERT_TRUE(WaitState(bobs, "running"));

  // The default format, column by column: %.18i %.9P %.8j %.8u %.2t %.10M %.6D %R, sorted by
  // partition, then state (pending first).
  const CliResult sq = As("alice", {"squeue"});
  ASSERT_EQ(sq.code, 0) << sq.err;
  const auto lines = Lines(sq.out);
  ASSERT_EQ(lines.size(), 4u) << sq.out;
  EXPECT_EQ(lines[0],
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)");
  struct Row {
    std::string id, partition, name, user, st, time, nodes, reason;
  };
  std::vector<Row> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    ASSERT_GE(l.size(), 69u) << l;
    auto field = [&](size_t at, size_t n) {
      const std::string f = l.substr(at, n);
      return f.substr(f.find_first_not_of(' ') == std::string::npos ? f.size()
                                                                    : f.find_first_not_of(' '));
    };
    rows.push_back({field(0, 18), field(19, 9), field(29, 8), field(38, 8), field(47, 2),
                    field(50, 10), field(61, 6), l.substr(68)});
  }
  EXPECT_EQ(rows[0].id, bobs);
  EXPECT_EQ(rows[0].partition, "vision-de");
  EXPECT_EQ(rows[0].name, "bobjob");
  EXPECT_EQ(rows[0].user, "bob");
  EXPECT_EQ(rows[0].st, "R");
  EXPECT_EQ(rows[0].reason, "box");
  EXPECT_EQ(rows[1].id, wait);
  EXPECT_EQ(rows[1].partition, "vision-tr");
  EXPECT_EQ(rows[1].st, "PD");
  EXPECT_EQ(rows[1].time, "0:00");
  EXPECT_EQ(rows[1].nodes, "1");
  EXPECT_EQ(rows[1].reason, "(QuotaExceeded)");
  EXPECT_EQ(rows[2].id, run);
  EXPECT_EQ(rows[2].name, "trainer");
  EXPECT_EQ(rows[2].st, "R");
  EXPECT_TRUE(std::regex_match(rows[2].time, std::regex("[0-9]+:[0-5][0-9]"))) << rows[2].time;

  // -o with literals, -h; -t by code or name; -u, --me; -n, -j, -w; -S.
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-o", "%i|%t|%j|%u|%P|%D|%C|%b|%R"}),
            (std::set<std::string>{bobs + "|R|bobjob|bob|vision-dev|1|1|gres/gpu:1|box",
                                   wait + "|PD|waiter|alice|vision-train|1|1|gres/gpu:2|"
                                          "(QuotaExceeded)",
                                   run + "|R|trainer|alice|vision-train|1|1|gres/gpu:4|box"}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-t", "PD", "-o", "%i"}), (std::set<std::string>{wait}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "--states=running", "-o", "%i"}),
            (std::set<std::string>{run, bobs}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-t", "pd,R", "-o", "%i"}),
            (std::set<std::string>{run, wait, bobs}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-t", "CD", "-o", "%i"}), std::set<std::string>{});
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-u", "bob", "-o", "%i"}), (std::set<std::string>{bobs}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-u", "alice,bob", "-o", "%i"}).size(), 3u);
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "--me", "-o", "%i"}), (std::set<std::string>{run, wait}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-n", "waiter", "-o", "%i"}),
            (std::set<std::string>{wait}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-j", run, "-o", "%i"}), (std::set<std::string>{run}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-w", "box", "-o", "%i"}),
            (std::set<std::string>{run, bobs}));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-A", "vision", "-o", "%i"}).size(), 3u);
  EXPECT_EQ(As("alice", {"squeue", "-h", "-S", "-i", "-o", "%i"}).out,
            fmt::format("{}\n{}\n{}\n", bobs, wait, run));
  EXPECT_EQ(As("alice", {"squeue", "-hu", "bob", "-o", "%.6i|%-4t"}).code, 2);  // no '-' flag
  EXPECT_EQ(As("alice", {"squeue", "-hu", "bob", "-o", "%.6i|%4t|"}).out,
            fmt::format("{:>6}|R   |\n", bobs));
  // -l: the time, then state names and limits; --start: the pending ones.
  const auto longer = Lines(As("alice", {"squeue", "-l"}).out);
  ASSERT_EQ(longer.size(), 5u);
  EXPECT_TRUE(Contains(longer[1], "    STATE       TIME TIME_LIMI  NODES")) << longer[1];
  EXPECT_TRUE(Contains(longer[3], " PENDING ")) << longer[3];
  const auto start = Lines(As("alice", {"squeue", "--start"}).out);
  ASSERT_EQ(start.size(), 2u);
  EXPECT_TRUE(Contains(start[0], "START_TIME")) << start[0];
  EXPECT_EQ(Words(start[1]).at(0), wait);
  // Another tenant sees none of them; bad states and formats are usage errors.
  EXPECT_EQ(Lines(As("sam", {"squeue"}).out).size(), 1u);
  const CliResult bad_state = As("alice", {"squeue", "-t", "RUNING"});
  EXPECT_EQ(bad_state.code, 2);
  EXPECT_TRUE(Contains(bad_state.err, "did you mean \"RUNNING\"?")) << bad_state.err;
  EXPECT_EQ(As("alice", {"squeue", "-o", "%i %y"}).code, 2);
  // Slurm's environment variable for the format, below -o.
  CliOptions env = Options("alice");
  env.env["SQUEUE_FORMAT"] = "%i";
  EXPECT_EQ(LineSet(RunCli({"squeue", "-h", "-u", "bob"}, env).out), (std::set<std::string>{bobs}));
  EXPECT_EQ(RunCli({"squeue", "-h", "-u", "bob", "-o", "%u"}, env).out, "bob\n");

  // -i: again every SECONDS, each time with the time first.
  CliProcess iterate;
  ASSERT_TRUE(iterate.Start({"squeue", "-i", "1", "-o", "%i"}, Options("alice")));
  EXPECT_TRUE(iterate.ReadUntil(
      [](const std::string& out) {
        size_t n = 0;
        for (size_t at = out.find("JOBID"); at != std::string::npos;
             at = out.find("JOBID", at + 1)) {
          ++n;
        }
        return n >= 2;
      },
      20))
      << iterate.output();
}

TEST_F(SlurmViewsTest, SinfoPartitionsNodesAndReasons) {
  const CliResult idle = As("alice", {"sinfo"});
  ASSERT_EQ(idle.code, 0) << idle.err;
  EXPECT_EQ(idle.out,
            "PARTITION    AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
            "vision-train    up   infinite      1   idle box\n"
            "vision-dev*     up   infinite      1   idle box\n");
  EXPECT_EQ(As("alice",
               {"sinfo", "-h", "-p", "vision-dev", "-o", "%P %a %l %D %t %N %G %c %m %C %O %e %R"})
                .out,
            "vision-dev* up infinite 1 idle box gpu:A100-80G:8 32 131072 0/32/0/32 N/A 131072 "
            "vision-dev\n");
  const std::string job = Id("alice", {"--queue", "vision-dev", "--gpus", "1", "--cpus", "2",
                                       "--memory", "1Gi", "--", "sleep", "300"});
  ASSERT_TRUE(WaitState(job, "running"));
  EXPECT_EQ(As("alice", {"sinfo", "-h", "-p", "vision-dev", "-o", "%t %C %e %F %A"}).out,
            "mix 2/30/0/32 130048 1/0/0/1 1/0\n");
  const CliResult nodes = As("alice", {"sinfo", "-N"});
  EXPECT_EQ(LineSet(nodes.out).size(), 3u) << nodes.out;
  const auto node_lines = Lines(nodes.out);
  EXPECT_EQ(Words(node_lines[0]),
            (std::vector<std::string>{"NODELIST", "NODES", "PARTITION", "STATE"}));
  EXPECT_EQ(Words(node_lines[1]), (std::vector<std::string>{"box", "1", "vision-train", "mix"}));
  EXPECT_EQ(Words(node_lines[2]), (std::vector<std::string>{"box", "1", "vision-dev*", "mix"}));
  EXPECT_EQ(Words(Lines(As("alice", {"sinfo", "-s"}).out).at(1)),
            (std::vector<std::string>{"vision-train", "up", "infinite", "1/0/0/1", "box"}));

  // Cordoned with a reason: drng while the job is on it, drain once it is gone; -R says why.
  EXPECT_EQ(As("alice", {"sinfo", "-R", "-h"}).out, "");
  const CliResult cordon = As("admin", {"cordon", "box", "--reason", "bad fan"});
  ASSERT_EQ(cordon.code, 0) << cordon.err;
  const auto reasons = Lines(As("alice", {"sinfo", "-R"}).out);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0], "REASON               USER      TIMESTAMP           NODELIST");
  EXPECT_TRUE(std::regex_match(
      reasons[1],
      std::regex("bad fan              admin     [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8} box")))
      << reasons[1];
  EXPECT_EQ(As("alice", {"sinfo", "-h", "-t", "drain", "-o", "%R %T"}).out,
            "vision-train DRAINING\nvision-dev DRAINING\n");
  EXPECT_EQ(As("alice", {"sinfo", "-h", "-t", "idle,mix"}).out, "");
  EXPECT_TRUE(Contains(As("admin", {"nodes", "-o", "wide"}).out, "bad fan"));
  EXPECT_EQ(As("admin", {"cancel", job}).code, 0);
  bool drained = false;
  for (int i = 0; i < 200 && !drained; ++i) {
    drained =
        As("alice", {"sinfo", "-h", "-p", "vision-dev", "-o", "%t|%E"}).out == "drain|bad fan\n";
    if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(drained);
  ASSERT_EQ(As("admin", {"uncordon", "box"}).code, 0);
  EXPECT_EQ(As("alice", {"sinfo", "-R", "-h"}).out, "");
  EXPECT_EQ(As("alice", {"sinfo", "-t", "bogus"}).code, 2);
  // A tenant's own partitions only, its own default marked.
  EXPECT_EQ(As("sam", {"sinfo", "-h", "-o", "%P"}).out, "speech-train\n");
}

TEST_F(SlurmViewsTest, SacctAfterJobsEnd) {
  const std::string ok = Id("alice", {"--queue", "vision-dev", "--name", "ok", "--", "true"});
  const std::string bad =
      Id("alice", {"--queue", "vision-dev", "--name", "bad", "--", "sh", "-c", "exit 3"});
  const std::string killed =
      Id("alice", {"--queue", "vision-dev", "--name", "killed", "--", "sleep", "300"});
  const std::string slow = Id("alice", {"--queue", "vision-dev", "--name", "slow", "--walltime",
                                        "1s", "--grace-period", "1", "--", "sleep", "30"});
  const std::string bobs = Id("bob", {"--queue", "vision-dev", "--name", "bobs", "--", "true"});
  ASSERT_TRUE(WaitState(killed, "running"));
  ASSERT_EQ(As("alice", {"cancel", killed}).code, 0);
  for (const auto& [id, state] :
       std::vector<std::pair<std::string, std::string>>{{ok, "succeeded"},
                                                        {bad, "failed"},
                                                        {killed, "cancelled"},
                                                        {slow, "timed-out"},
                                                        {bobs, "succeeded"}}) {
    ASSERT_TRUE(WaitState(id, state)) << id << " " << Job(id);
  }

  // The default: the caller's jobs since midnight, Slurm's seven columns.
  const CliResult table = As("alice", {"sacct"});
  ASSERT_EQ(table.code, 0) << table.err;
  const auto lines = Lines(table.out);
  ASSERT_EQ(lines.size(), 6u) << table.out;
  EXPECT_EQ(lines[0],
            "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ");
  EXPECT_EQ(lines[1],
            "------------ ---------- ---------- ---------- ---------- ---------- -------- ");
  EXPECT_EQ(lines[3], fmt::format("{:<12}        bad vision-dev     vision          1     FAILED "
                                  "     3:0 ",
                                  bad));
  EXPECT_EQ(Words(lines[4]).at(5), "CANCELLED+");

  // -P: what scripts parse. A stopped task's exit code is 0:SIGNAL (128 + N recorded) or 0:0.
  auto exit_of = [&](const std::string& id) {
    return As("alice", {"sacct", "-j", id, "-n", "-P", "-o", "ExitCode"}).out;
  };
  const std::regex stopped("0:(0|9|15)\n");
  EXPECT_TRUE(std::regex_match(exit_of(killed), stopped)) << exit_of(killed);
  EXPECT_TRUE(std::regex_match(exit_of(slow), stopped)) << exit_of(slow);
  const CliResult parsable =
      As("alice", {"sacct", "-P", "-o", "JobID,JobName,State,Account,User,AllocCPUS"});
  ASSERT_EQ(parsable.code, 0) << parsable.err;
  EXPECT_EQ(parsable.out, fmt::format("JobID|JobName|State|Account|User|AllocCPUS\n"
                                      "{}|ok|COMPLETED|vision|alice|1\n"
                                      "{}|bad|FAILED|vision|alice|1\n"
                                      "{}|killed|CANCELLED by alice|vision|alice|1\n"
                                      "{}|slow|TIMEOUT|vision|alice|1\n",
                                      ok, bad, killed, slow));
  EXPECT_EQ(As("alice", {"sacct", "-p", "-n", "-j", ok, "-o", "JobID,State"}).out,
            fmt::format("{}|COMPLETED|\n", ok));
  // Who: -a, -u; which: -s (with a window: by itself it means now), -j, --name; when: -S, -E.
  EXPECT_EQ(LineSet(As("alice", {"sacct", "-a", "-n", "-P", "-o", "JobName"}).out),
            (std::set<std::string>{"ok", "bad", "killed", "slow", "bobs"}));
  EXPECT_EQ(As("alice", {"sacct", "-u", "bob", "-n", "-P", "-o", "JobName"}).out, "bobs\n");
  EXPECT_EQ(As("admin", {"sacct", "-n", "-P", "-o", "JobName", "--name", "bobs"}).out, "bobs\n");
  EXPECT_EQ(As("alice", {"sacct", "-s", "F", "-n", "-P", "-o", "JobName"}).out, "");
  EXPECT_EQ(As("alice", {"sacct", "-s", "F", "-S", "today", "-n", "-P", "-o", "JobName"}).out,
            "bad\n");
  EXPECT_EQ(LineSet(As("alice", {"sacct", "-s", "CA,timeout", "-S", "now-1hours", "-X", "-n", "-P",
                                 "-o", "JobName"})
                        .out),
            (std::set<std::string>{"killed", "slow"}));
  EXPECT_EQ(As("alice", {"sacct", "-j", bad, "-n", "-P", "-o", "JobName,State"}).out,
            "bad|FAILED\n");
  EXPECT_EQ(As("alice", {"sacct", "-S", "2000-01-01", "-E", "2000-01-02T00:00", "-n"}).out, "");
  EXPECT_EQ(As("alice", {"sacct", "-S", "now+1hour"}).code, 2);  // after its end (now)
  EXPECT_EQ(As("alice", {"sacct", "-S", "last tuesday"}).code, 2);
  const CliResult bad_field = As("alice", {"sacct", "-o", "JobID,Stat"});
  EXPECT_EQ(bad_field.code, 2);
  EXPECT_TRUE(Contains(bad_field.err, "did you mean \"State\"?")) << bad_field.err;
  // Every field sacct takes here has a value; the environment's default format.
  const std::string all =
      "JobID,JobIDRaw,JobName,Partition,Account,User,State,ExitCode,Elapsed,ElapsedRaw,Start,End,"
      "Submit,Eligible,AllocCPUS,NCPUS,ReqCPUS,AllocTRES,ReqTRES,AllocGRES,ReqGRES,AllocNodes,"
      "NNodes,ReqNodes,NodeList,ReqMem,Timelimit,TimelimitRaw,Reason,Priority,QOS,CPUTime,"
      "CPUTimeRAW,WorkDir,Cluster";
  const CliResult every = As("alice", {"sacct", "-P", "-j", slow, "-o", all});
  ASSERT_EQ(every.code, 0) << every.err;
  const auto every_lines = Lines(every.out);
  ASSERT_EQ(every_lines.size(), 2u);
  EXPECT_EQ(std::count(every_lines[1].begin(), every_lines[1].end(), '|'), 34);
  EXPECT_TRUE(Contains(every_lines[1], "|00:00:01|") || Contains(every_lines[1], "|00:00:02|"))
      << every_lines[1];
  CliOptions o = Options("alice");
  o.env["SACCT_FORMAT"] = "JobName,State%20";
  EXPECT_EQ(Lines(RunCli({"sacct", "-n", "-j", ok}, o).out).at(0),
            "        ok            COMPLETED ");
}

TEST_F(SlurmViewsTest, JobArraysAreOneRow) {
  const CliResult sub = As("alice", {"submit", "-o", "json", "--queue", "vision-train", "--gpus",
                                     "4", "--name", "arr", "--array", "0-3", "--", "sleep", "300"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const json items = ParseOrNull(sub.out)["items"];
  ASSERT_EQ(items.size(), 4u) << sub.out;
  if (!items[0].contains("array")) {
    GTEST_SKIP() << "the server does not put \"array\" on the jobs of an array yet; this test "
                    "runs once job arrays are in the API";
  }
  const std::string a = std::to_string(items[0]["array"]["id"].get<uint64_t>());
  const std::string first = std::to_string(items[0]["id"].get<uint64_t>());
  ASSERT_TRUE(WaitState(first, "running"));  // the queue's max lets one run at a time
  // arbiter jobs: one row, its states counted; -r: one row each.
  const auto rows = Lines(As("alice", {"jobs"}).out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(Words(rows[1]).at(0), a + "_[0-3]");
  EXPECT_TRUE(Contains(rows[1], "1 running, 3 pending")) << rows[1];
  EXPECT_EQ(JobIds("alice", {"-r"}),
            (std::set<std::string>{a + "_0", a + "_1", a + "_2", a + "_3"}));
  // squeue: the pending ones as one row, the running one on its own; -r: each.
  const auto ids = Ids("alice", {"squeue", "-h", "-o", "%i"});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_TRUE(ids.count(a + "_0"));
  EXPECT_TRUE(std::regex_match(*std::next(ids.begin()), std::regex(a + "_\\[1-3(%[0-9]+)?\\]")) ||
              std::regex_match(*ids.begin(), std::regex(a + "_\\[1-3(%[0-9]+)?\\]")));
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-r", "-o", "%i %F %K"}).size(), 4u);
  EXPECT_EQ(Ids("alice", {"squeue", "-h", "-j", a + "_2", "-r", "-o", "%i"}),
            (std::set<std::string>{a + "_2"}));
  EXPECT_EQ(Ids("alice", {"sacct", "-n", "-P", "-o", "JobID"}),
            (std::set<std::string>{a + "_0", a + "_1", a + "_2", a + "_3"}));
}

// Slurm's command names run arbiter's views: a link named squeue is `arbiter squeue`.
TEST_F(SlurmViewsTest, ALinkNamedSqueueRunsSqueue) {
  const std::string job = Id("alice", {"--queue", "vision-dev", "--", "sleep", "300"});
  ASSERT_TRUE(WaitState(job, "running"));
  TempDir bin;
  for (const char* name : {"squeue", "sinfo", "sacct", "scancel"}) {
    ASSERT_EQ(symlink(ARBITER_BINARY, (bin.path() + "/" + name).c_str()), 0);
  }
  CliOptions o = Options("alice");
  o.binary = bin.path() + "/squeue";
  const CliResult linked = RunCli({"-h", "-o", "%i %u %t"}, o);
  EXPECT_EQ(linked.code, 0) << linked.err;
  EXPECT_EQ(linked.out, fmt::format("{} alice R\n", job));
  EXPECT_EQ(linked.out, As("alice", {"squeue", "-h", "-o", "%i %u %t"}).out);
  o.binary = bin.path() + "/sinfo";
  EXPECT_EQ(RunCli({"-h", "-o", "%P"}, o).out, "vision-train\nvision-dev*\n");
  o.binary = bin.path() + "/sacct";
  EXPECT_EQ(RunCli({"-n", "-X", "-P", "-o", "JobID"}, o).out, job + "\n");
  o.binary = bin.path() + "/squeue";
  const CliResult typo = RunCli({"--usr", "alice"}, o);
  EXPECT_EQ(typo.code, 2);
  EXPECT_EQ(typo.err,
            "error: unknown flag \"--usr\" for \"arbiter squeue\"; did you mean "
            "\"--user\"?\n");
  // scancel is another command's: this arbiter may not have it yet.
  o.binary = bin.path() + "/scancel";
  const CliResult scancel = RunCli({"--help"}, o);
  if (scancel.code != 0) {
    EXPECT_EQ(scancel.code, 2);
    EXPECT_TRUE(Contains(scancel.err, "scancel is not available in this arbiter")) << scancel.err;
  }
}

// `make install DESTDIR=...`: the binaries side by side and Slurm's names as links to arbiter.
TEST_F(SlurmViewsTest, MakeInstallPutsTheBinariesAndSlurmsNames) {
  const std::filesystem::path build = std::filesystem::path(ARBITER_BINARY).parent_path();
  if (!std::filesystem::exists(build / "build.ninja") || access("/usr/bin/make", X_OK) != 0) {
    GTEST_SKIP() << "needs make and the Ninja build folder of " << ARBITER_BINARY;
  }
  TempDir dest;
  CliOptions o;
  o.binary = "/usr/bin/make";
  o.timeout_s = 300;
  const CliResult make =
      RunCli({"-s", "-C", ARBITER_SOURCE_DIR, "install", "BUILD_DIR=" + build.string(),
              "DESTDIR=" + dest.path(), "PREFIX=/opt/arbiter"},
             o);
  ASSERT_EQ(make.code, 0) << make.out << make.err;
  const std::filesystem::path bin = dest.path() + "/opt/arbiter/bin";
  for (const char* b : {"arbiter", "arbiter-shim", "arbiter-srun"}) {
    EXPECT_EQ(access((bin / b).c_str(), X_OK), 0) << b;
  }
  for (const char* name : {"squeue", "sbatch", "scancel", "sinfo", "sacct"}) {
    EXPECT_TRUE(std::filesystem::is_symlink(bin / name)) << name;
    EXPECT_EQ(std::filesystem::read_symlink(bin / name), "arbiter") << name;
  }
  const std::string job = Id("alice", {"--queue", "vision-dev", "--", "sleep", "300"});
  CliOptions as_alice = Options("alice");
  as_alice.binary = (bin / "squeue").string();
  const CliResult sq = RunCli({"-h", "-o", "%i %u"}, as_alice);
  EXPECT_EQ(sq.code, 0) << sq.err;
  EXPECT_EQ(sq.out, job + " alice\n");
}

}  // namespace
}  // namespace arbiter::testing
