// Job arrays (Slurm's --array): the throttle's pure arithmetic, and the control plane on a real
// store with a fake clock: one submission makes one job per index in one batch, under one
// idempotency key; the driver never lets more than max_running elements hold resources and starts
// the next as one ends, lowest index first, across a restart too; the array is cancelled and its
// throttle changed as one object; another tenant sees none of it.
#include "server/job_arrays.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "api/agent_codec.h"
#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

TEST(ArrayThrottle, OffersThePlacesLeftThenSaysWhy) {
  std::map<uint64_t, int32_t> asked;
  ArrayThrottle t([&](uint64_t array) {
    ++asked[array];
    return array == 7 ? 1 : 0;  // array 7 holds one element already
  });
  std::string why;
  EXPECT_TRUE(t.Offer(7, 3, &why));
  EXPECT_TRUE(t.Offer(7, 3, &why));
  EXPECT_FALSE(t.Offer(7, 3, &why));
  EXPECT_EQ(why,
            "array 7 runs 1 of at most 3 elements at once, and its next 2 are ahead of this one "
            "(%3)");
  EXPECT_TRUE(t.Offer(9, 1, &why));
  EXPECT_FALSE(t.Offer(9, 1, &why));
  EXPECT_EQ(why,
            "array 9 runs 0 of at most 1 elements at once, and its next 1 is ahead of this "
            "one (%1)");
  ArrayThrottle full([](uint64_t) { return 2; });
  EXPECT_FALSE(full.Offer(4, 2, &why));
  EXPECT_EQ(why, "array 4 runs 2 of at most 2 elements at once (%2)");
  EXPECT_EQ(asked, (std::map<uint64_t, int32_t>{{7, 1}, {9, 1}}));  // once per array and cycle
}

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
  - name: other
    queues:
      - {name: other-q, guaranteed: {gpu: 0}}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: bea, tenant: lab, role: member}
  - {name: olaf, tenant: other, role: member}
)";

class JobArrayTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-arrays");
    Register("gpu-01", "i1", 4);
  }

  // Submits an array of 1-GPU jobs as `p`; its first element's job object.
  Result<ControlPlane::Submitted> SubmitArray(const std::string& indices, int32_t max_running,
                                              const Principal& p, const std::string& key = "",
                                              bool* created = nullptr) {
    std::optional<api::ArrayRequest> array;
    auto spec = api::ParseJobSubmission(
        json{{"queue", "lab-q"},
             {"name", "sweep"},
             {"command", {"true"}},
             {"resources", {{"gpus", 1}}},
             {"array", {{"indices", indices}, {"max_running", max_running}}}}
            .dump(),
        &array);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_TRUE(array.has_value());
    bool made = false;
    return cp_->SubmitArray(p, std::move(spec).value(), *array, key, created ? created : &made);
  }
  // The elements of array `id`, as GET /api/v1/jobs?array=ID lists them.
  std::vector<json> Elements(uint64_t id, const Principal& p) {
    JobFilter f;
    f.array = id;
    f.limit = 1000;
    auto r = cp_->ListJobs(p, f);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? json::parse(*r)["items"].get<std::vector<json>>() : std::vector<json>{};
  }
  // The elements holding resources (admitted, starting, running, or stopping), by index.
  std::set<int64_t> Holding(uint64_t id) {
    std::set<int64_t> out;
    for (const json& j : Elements(id, admin_)) {
      const std::string s = j["state"];
      if (s == "admitted" || s == "starting" || s == "running" || j.contains("stopping")) {
        out.insert(j["array"]["index"].get<int64_t>());
      }
    }
    return out;
  }
  // The assignment of job `id` on gpu-01, from a heartbeat's answer.
  json Assignment(uint64_t id) {
    const json out = Beat("gpu-01", "i1");
    for (const json& a : out["assignments"]) {
      if (a["job"] == id) return a;
    }
    return json();
  }
  // Runs job `id`'s current attempt to its end with `code`.
  void Finish(uint64_t id, int32_t code) {
    const json a = Assignment(id);
    ASSERT_TRUE(a.is_object()) << "job " << id << " is not on gpu-01";
    const uint64_t attempt = a["attempt"];
    Beat("gpu-01", "i1",
         {{++seq_, id, 0, attempt, TaskEvent::kStarted, 0, false},
          {++seq_, id, 0, attempt, TaskEvent::kExited, code, false}});
  }
  void Cycle() { ASSERT_TRUE(cp_->RunSchedulingCycle().ok()); }

  Principal ann_{"ann", "lab", Role::kMember, "an"};
  Principal bea_{"bea", "lab", Role::kMember, "be"};
  Principal olaf_{"olaf", "other", Role::kMember, "ol"};
  uint64_t seq_ = 0;
};

TEST_F(JobArrayTest, OneSubmissionIsOneJobPerIndexWithTheArrayObject) {
  auto r = SubmitArray("0-9:3,20", 0, ann_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const uint64_t a = r->id;
  const json first = json::parse(r->body);
  EXPECT_EQ(first["array"], (json{{"id", a}, {"index", 0}, {"size", 5}, {"max_running", 0}}));
  const std::vector<json> elements = Elements(a, ann_);
  ASSERT_EQ(elements.size(), 5u);
  const std::vector<int64_t> indices = {0, 3, 6, 9, 20};
  for (size_t k = 0; k < elements.size(); ++k) {
    const json& j = elements[k];
    EXPECT_EQ(j["id"], a + k);      // consecutive ids, in the order of the indices
    EXPECT_EQ(j["name"], "sweep");  // every element keeps the array's name, as in Slurm
    EXPECT_EQ(j["array"], (json{{"id", a}, {"index", indices[k]}, {"size", 5}, {"max_running", 0}}))
        << j.dump();
    EXPECT_EQ(j["state"], "pending");
  }
  // One element by its index, and the array as one object.
  JobFilter f;
  f.array = a;
  f.index = 9;
  const json nine = json::parse(*cp_->ListJobs(ann_, f));
  ASSERT_EQ(nine["items"].size(), 1u);
  EXPECT_EQ(nine["items"][0]["id"], a + 3);
  const json array = *cp_->GetArray(ann_, a);
  EXPECT_EQ(array["indices"], "0,3,6,9,20");
  EXPECT_EQ(array["size"], 5);
  EXPECT_EQ(array["states"], (json{{"pending", 5}}));
  // A job of no array has no "array" member.
  const uint64_t single = Submit({});
  EXPECT_FALSE(cp_->GetJob(admin_, single)->contains("array"));
  EXPECT_EQ(cp_->GetArray(admin_, single).status().code(), StatusCode::kNotFound);
}

TEST_F(JobArrayTest, AnIdempotencyKeyStandsForTheWholeArray) {
  bool created = false;
  auto r = SubmitArray("0-99", 0, ann_, "k1", &created);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(created);
  auto again = SubmitArray("0-99", 0, ann_, "k1", &created);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(again->id, r->id);
  EXPECT_EQ(json::parse(again->body), json::parse(r->body));
  // The same indices written otherwise are the same submission; other indices are not.
  EXPECT_TRUE(SubmitArray("0-49,50-99", 0, ann_, "k1").ok());
  auto other = SubmitArray("0-98", 0, ann_, "k1");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kUnprocessable);
  EXPECT_EQ(SubmitArray("0-99", 5, ann_, "k1").status().code(), StatusCode::kUnprocessable);
  Start();  // a restart keeps the key
  auto after = SubmitArray("0-99", 0, ann_, "k1", &created);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(after->id, r->id);
  JobFilter all;
  all.limit = 1000;
  EXPECT_EQ(json::parse(*cp_->ListJobs(admin_, all))["items"].size(), 100u);
}

TEST_F(JobArrayTest, TheThrottleHoldsAcrossCyclesAndARestart) {
  auto r = SubmitArray("0-5", 2, ann_);  // 6 one-GPU elements, 4 GPUs, at most 2 at once
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const uint64_t a = r->id;
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{0, 1}));  // lower indices first
  const json waiting = *cp_->GetJob(admin_, a + 2);
  EXPECT_EQ(waiting["pending"]["code"], "ArrayThrottled") << waiting.dump();
  // Decided while 0 and 1 were being offered; the next cycle sees them running.
  EXPECT_EQ(waiting["pending"]["message"],
            fmt::format("array {} runs 0 of at most 2 elements at once, and its next 2 are ahead "
                        "of this one (%2)",
                        a));
  Cycle();
  EXPECT_EQ(Holding(a).size(), 2u);
  EXPECT_EQ((*cp_->GetJob(admin_, a + 2))["pending"]["message"],
            fmt::format("array {} runs 2 of at most 2 elements at once (%2)", a));
  // Each end starts the next, and never more than 2 hold resources.
  Finish(a, 0);
  EXPECT_EQ(State(a), "succeeded");
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{1, 2}));
  Start();  // a restart: the limit is in every element's stored spec
  Register("gpu-01", "i1", 4);
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{1, 2}));
  EXPECT_EQ((*cp_->GetJob(admin_, a + 5))["array"]["max_running"], 2);
  // A cancelled element still stopping its processes holds its GPUs: it counts.
  const json running = Assignment(a + 1);
  ASSERT_TRUE(running.is_object());
  Beat("gpu-01", "i1", {{++seq_, a + 1, 0, running["attempt"], TaskEvent::kStarted, 0, false}});
  ASSERT_TRUE(cp_->JobAction(ann_, a + 1, "cancel").ok());
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{1, 2}));
  Beat("gpu-01", "i1", {{++seq_, a + 1, 0, running["attempt"], TaskEvent::kExited, 143, false}});
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{2, 3}));
}

TEST_F(JobArrayTest, TheThrottleChangesForTheLiveArray) {
  auto r = SubmitArray("0-5", 1, ann_);
  ASSERT_TRUE(r.ok());
  const uint64_t a = r->id;
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{0}));
  // Another member may read it but not change it; another tenant does not see it.
  EXPECT_EQ(cp_->SetArrayThrottle(bea_, a, 3).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->SetArrayThrottle(olaf_, a, 3).status().code(), StatusCode::kNotFound);
  auto changed = cp_->SetArrayThrottle(ann_, a, 3);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ((*changed)["max_running"], 3);
  Cycle();
  EXPECT_EQ(Holding(a), (std::set<int64_t>{0, 1, 2}));
  for (const json& j : Elements(a, ann_)) EXPECT_EQ(j["array"]["max_running"], 3) << j.dump();
  Start();
  EXPECT_EQ((*cp_->GetJob(admin_, a + 4))["array"]["max_running"], 3);
  // No limit: the GPUs are the limit.
  ASSERT_TRUE(cp_->SetArrayThrottle(admin_, a, 0).ok());
  Cycle();
  EXPECT_EQ(Holding(a).size(), 4u);
  EXPECT_EQ(cp_->SetArrayThrottle(admin_, a, -1).status().field(), "max_running");
}

TEST_F(JobArrayTest, CancellingTheArrayIsOneActionOnEveryLiveElement) {
  auto r = SubmitArray("1-4", 0, ann_);
  ASSERT_TRUE(r.ok());
  const uint64_t a = r->id;
  Cycle();
  Finish(a, 0);  // element 1 has ended: left as it is
  EXPECT_EQ(cp_->ArrayAction(bea_, a, "cancel").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->ArrayAction(olaf_, a, "cancel").status().code(), StatusCode::kNotFound);
  auto done = cp_->ArrayAction(ann_, a, "cancel");
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ((*done)["changed"], (json{a + 1, a + 2, a + 3}));
  EXPECT_EQ((*done)["states"], (json{{"cancelled", 3}, {"succeeded", 1}}));
  for (uint64_t id = a + 1; id <= a + 3; ++id) {
    EXPECT_EQ((*cp_->GetJob(admin_, id))["reason"], "cancel by ann");
  }
  auto again = cp_->ArrayAction(ann_, a, "cancel");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kConflict);
  EXPECT_EQ(again.status().message(),
            fmt::format("array {} has no element to cancel: its elements are 3 cancelled, 1 "
                        "succeeded",
                        a));
  // Retried together, they wait out their backoff and go back to pending.
  auto retried = cp_->ArrayAction(ann_, a, "retry");
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ((*retried)["changed"].size(), 3u);
}

TEST_F(JobArrayTest, AnotherTenantNeitherSeesNorResolvesTheElements) {
  auto r = SubmitArray("0-2", 0, ann_);
  ASSERT_TRUE(r.ok());
  const uint64_t a = r->id;
  EXPECT_TRUE(Elements(a, olaf_).empty());
  EXPECT_EQ(Elements(a, bea_).size(), 3u);
  auto get = cp_->GetArray(olaf_, a);
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(get.status().message(), fmt::format("array {} not found", a));
  for (const char* action : {"cancel", "suspend", "resume", "retry"}) {
    EXPECT_EQ(cp_->ArrayAction(olaf_, a, action).status().message(),
              fmt::format("array {} not found", a));
  }
  EXPECT_EQ(State(a), "pending");
}

TEST_F(JobArrayTest, ElementsRunWithTheirArraysEnvironment) {
  auto r = SubmitArray("0-6:2", 0, ann_);
  ASSERT_TRUE(r.ok());
  const uint64_t a = r->id;
  Cycle();
  const json assignment = Assignment(a + 2);
  ASSERT_TRUE(assignment.is_object());
  EXPECT_EQ(assignment["array"],
            (json{{"id", a}, {"index", 4}, {"size", 4}, {"min", 0}, {"max", 6}, {"step", 2}}));
  EXPECT_EQ(assignment["queue"], "lab-q");
  auto parsed = api::ParseTaskAssignment(assignment, "a");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->spec.array, (JobArrayElement{a, 4, 4, 0}));
  EXPECT_EQ(parsed->array_bounds, (ArrayBounds{0, 6, 2}));
}

TEST_F(JobArrayTest, TooMuchSpecInAllIsRefused) {
  std::optional<api::ArrayRequest> array;
  auto spec = api::ParseJobSubmission(json{{"queue", "lab-q"},
                                           {"command", {"sh", "-c", std::string(100000, 'x')}},
                                           {"array", {{"indices", "0-9999"}}}}
                                          .dump(),
                                      &array);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  bool created = false;
  auto r = cp_->SubmitArray(ann_, *spec, *array, "", &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "array.indices");
}

}  // namespace
}  // namespace arbiter::server
