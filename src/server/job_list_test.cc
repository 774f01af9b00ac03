// GET /api/v1/jobs' filters on the control plane: lists of values, active, since and until, and
// values the caller cannot see refused with the field and the values it may use.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
priority_classes:
  - {name: normal, value: 100}
tenants:
  - name: lab
    queues:
      - {name: lab-q, aliases: [gpu_A100]}
      - name: lab-dev
  - name: other
    queues:
      - name: other-q
users:
  - {name: alice, tenant: lab, role: member}
  - {name: olga, tenant: other, role: member}
)";

class JobListTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "arbiter-job-list"); }

  // The ids `p` gets for `f`.
  std::set<uint64_t> Ids(const Principal& p, JobFilter f) {
    auto r = cp_->ListJobs(p, std::move(f));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::set<uint64_t> ids;
    if (!r.ok()) return ids;
    const json list = json::parse(*r);
    for (const json& j : list["items"]) ids.insert(j["id"].get<uint64_t>());
    return ids;
  }

  Status Refused(const Principal& p, JobFilter f) {
    auto r = cp_->ListJobs(p, std::move(f));
    return r.ok() ? Status::Ok() : r.status();
  }

  Principal alice_{"alice", "lab", Role::kMember, "t-alice"};
};

TEST_F(JobListTest, ListsActiveSinceAndUntil) {
  const TimeMs t0 = now_;
  const uint64_t early = Submit({{"queue", "lab-q"}});
  now_ = t0 + 10'000;
  const uint64_t dev = Submit({{"queue", "lab-dev"}});
  const uint64_t other = Submit({{"queue", "other-q"}});
  now_ = t0 + 20'000;
  ASSERT_TRUE(cp_->JobAction(admin_, early, "cancel").ok());  // ended at t0 + 20 s
  now_ = t0 + 30'000;

  JobFilter lists;
  lists.queues = {"lab-q", "lab-dev"};
  EXPECT_EQ(Ids(admin_, lists), (std::set<uint64_t>{early, dev}));
  JobFilter states;
  states.states = {"pending", "cancelled"};
  states.tenants = {"lab", "other"};
  EXPECT_EQ(Ids(admin_, states), (std::set<uint64_t>{early, dev, other}));
  JobFilter active;
  active.active = true;
  EXPECT_EQ(Ids(admin_, active), (std::set<uint64_t>{dev, other}));
  // since: not ended before it; until: submitted by it.
  JobFilter since;
  since.since = t0 + 20'000;
  EXPECT_EQ(Ids(admin_, since), (std::set<uint64_t>{early, dev, other}));
  since.since = t0 + 20'001;
  EXPECT_EQ(Ids(admin_, since), (std::set<uint64_t>{dev, other}));
  JobFilter until;
  until.until = t0 + 5'000;
  EXPECT_EQ(Ids(admin_, until), (std::set<uint64_t>{early}));
  // Queues as submissions name them: an alias, another case.
  JobFilter alias;
  alias.queues = {"GPU_a100"};
  EXPECT_EQ(Ids(alice_, alias), (std::set<uint64_t>{early}));
  // A member sees its tenant's only, and may name only what it sees.
  EXPECT_EQ(Ids(alice_, {}), (std::set<uint64_t>{early, dev}));
}

// q: the jobs whose name or command contains the text, in any case (the API lower-cases it).
TEST_F(JobListTest, TextMatchesTheNameOrTheCommandInAnyCase) {
  const uint64_t named = Submit({{"queue", "lab-q"}, {"name", "ResNet-50 sweep"}});
  const uint64_t command =
      Submit({{"queue", "lab-q"}, {"command", {"python3", "train_resnet.py"}}});
  const uint64_t neither = Submit({{"queue", "lab-q"}, {"command", {"sleep", "1"}}});
  JobFilter f;
  f.text = "resnet";
  EXPECT_EQ(Ids(admin_, f), (std::set<uint64_t>{named, command}));
  f.text = "python3 train";  // across the command's words
  EXPECT_EQ(Ids(admin_, f), (std::set<uint64_t>{command}));
  f.text = "nothing like it";
  EXPECT_TRUE(Ids(admin_, f).empty());
  f.text = "";
  EXPECT_EQ(Ids(admin_, f), (std::set<uint64_t>{named, command, neither}));
}

TEST_F(JobListTest, ValuesTheCallerCannotSeeAreRefusedNamingTheKnownOnes) {
  Submit({{"queue", "other-q"}});
  struct Case {
    JobFilter filter;
    const char* field;
    const char* message;
  };
  JobFilter q;
  q.queues = {"other-q"};
  JobFilter q2;
  q2.queues = {"lab-q", "nosuch"};
  JobFilter t;
  t.tenants = {"other"};
  JobFilter u;
  u.users = {"olga"};
  JobFilter s;
  s.states = {"runing"};
  JobFilter ty;
  ty.types = {"inference"};
  for (const Case& c :
       {Case{q, "queue", "queue other-q not found; queues you can see: lab-dev, lab-q"},
        Case{q2, "queue", "queue nosuch not found; queues you can see: lab-dev, lab-q"},
        Case{t, "tenant", "tenant other not found; tenants you can see: lab"},
        Case{u, "user", "user olga not found; users you can see: alice"},
        Case{s, "state",
             "unknown state 'runing'; states: admitted, awaiting_approval, cancelled, failed, "
             "lost, pending, preempted, preempting, rejected, retry-wait, running, starting, "
             "succeeded, suspended, timed-out"},
        Case{ty, "type",
             "unknown type 'inference'; types: batch-inference, evaluation, experiment, "
             "fine-tuning, service, training"}}) {
    const Status st = Refused(alice_, c.filter);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(st.field(), c.field);
    EXPECT_EQ(st.message(), c.message);
  }
  // An admin sees every tenant's; the caller's own name is always known.
  EXPECT_TRUE(Refused(admin_, q).ok());
  JobFilter self;
  self.users = {"admin"};
  EXPECT_TRUE(Refused(admin_, self).ok());
}

}  // namespace
}  // namespace arbiter::server
