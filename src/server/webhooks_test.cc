// Webhooks: the signature, the retry schedule, which hooks an event goes to, deliveries retried
// and given up, durable across a restart, budget alerts once per period, and the control plane's
// job transitions raising their events.
#include "server/webhooks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/control_plane_test_fixture.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

TEST(WebhookSignature, IsHmacSha256OfTheTimestampDotBody) {
  // printf '%s' '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
  EXPECT_EQ(WebhookSignature("whsec_test", 1700000000, R"({"a":1})"),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789");
  EXPECT_NE(WebhookSignature("whsec_other", 1700000000, R"({"a":1})"),
            WebhookSignature("whsec_test", 1700000000, R"({"a":1})"));
  EXPECT_NE(WebhookSignature("whsec_test", 1700000001, R"({"a":1})"),
            WebhookSignature("whsec_test", 1700000000, R"({"a":1})"));
}

TEST(WebhookRetryDelay, DoublesUpToTheCapWithJitterInTheUpperHalf) {
  WebhookRetryPolicy p;
  p.base_delay_ms = 1000;
  p.max_delay_ms = 10000;
  // unit 0: half the delay; unit -> 1: the whole delay.
  EXPECT_EQ(WebhookRetryDelayMs(p, 1, 0.0), 500);
  EXPECT_EQ(WebhookRetryDelayMs(p, 1, 0.999999), 999);
  EXPECT_EQ(WebhookRetryDelayMs(p, 2, 0.0), 1000);
  EXPECT_EQ(WebhookRetryDelayMs(p, 3, 0.0), 2000);
  EXPECT_EQ(WebhookRetryDelayMs(p, 4, 0.0), 4000);
  EXPECT_EQ(WebhookRetryDelayMs(p, 5, 0.0), 5000);  // capped at 10 s
  EXPECT_EQ(WebhookRetryDelayMs(p, 60, 0.0), 5000);
  EXPECT_EQ(WebhookRetryDelayMs(p, 60, 0.5), 7500);
  for (int n = 1; n < 30; ++n) {
    const int64_t d = WebhookRetryDelayMs(p, n, 0.3);
    EXPECT_GE(d, 1);
    EXPECT_LE(d, p.max_delay_ms);
  }
}

TEST(WebhookRetry, ConnectionErrorsTimeoutsServerErrorsAnd429AreRetried) {
  for (int s : {0, 408, 429, 500, 502, 503, 504}) EXPECT_TRUE(WebhookStatusRetryable(s)) << s;
  for (int s : {200, 204, 301, 400, 401, 403, 404, 410, 422}) {
    EXPECT_FALSE(WebhookStatusRetryable(s)) << s;
  }
}

TEST(JobWebhookEvent, MapsTransitionsToEvents) {
  EXPECT_EQ(JobWebhookEvent("running", "succeeded"), "job.succeeded");
  EXPECT_EQ(JobWebhookEvent("running", "failed"), "job.failed");
  EXPECT_EQ(JobWebhookEvent("running", "timed-out"), "job.failed");
  EXPECT_EQ(JobWebhookEvent("preempting", "preempted"), "job.preempted");
  EXPECT_EQ(JobWebhookEvent("", "awaiting_approval"), "job.awaiting_approval");
  EXPECT_EQ(JobWebhookEvent("awaiting_approval", "pending"), "job.approved");
  EXPECT_EQ(JobWebhookEvent("awaiting_approval", "rejected"), "job.rejected");
  EXPECT_EQ(JobWebhookEvent("", "pending"), "");
  EXPECT_EQ(JobWebhookEvent("preempted", "pending"), "");
  EXPECT_EQ(JobWebhookEvent("running", "cancelled"), "");
  EXPECT_EQ(JobWebhookEvent("admitted", "running"), "");
}

TEST(WebhookUrl, HttpOrHttpsWithAHost) {
  EXPECT_TRUE(ValidateWebhookUrl("http://127.0.0.1:8080/hook").ok());
  EXPECT_TRUE(ValidateWebhookUrl("https://hooks.example.com/services/T/B?x=1").ok());
  EXPECT_TRUE(ValidateWebhookUrl("https://example.com").ok());
  for (const char* bad : {"", "ftp://example.com/x", "example.com/hook", "http://", "https:///x",
                          "http://:80/x", "http://user:pw@example.com/", "http://a b.com/",
                          "http://example.com/#frag", "javascript:alert(1)"}) {
    Status st = ValidateWebhookUrl(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.field(), "url") << bad;
  }
  EXPECT_FALSE(ValidateWebhookUrl("https://example.com/" + std::string(3000, 'a')).ok());
}

TEST(WebhookSlack, OneReadableLine) {
  const json job = {{"id", 42},        {"name", "train"},   {"user", "ann"},
                    {"tenant", "lab"}, {"queue", "lab-q"},  {"state", "failed"},
                    {"exit_code", 3},  {"reason", "exit 3"}};
  const json body = json::parse(WebhookSlackBody("job.failed", {{"job", job}}));
  ASSERT_TRUE(body.contains("text"));
  EXPECT_EQ(body.size(), 1u);
  const std::string text = body["text"];
  EXPECT_NE(text.find("Job 42 (train) of ann in lab/lab-q failed (exit code 3)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const json budget = json::parse(WebhookSlackBody(
      "budget.80",
      {{"tenant", "lab"},
       {"budget",
        {{"percent", 83}, {"gpu_hours", 100.0}, {"period", "month"}, {"gpu_hours_used", 83.2}}}}));
  EXPECT_NE(budget["text"].get<std::string>().find("lab has used 83% of its 100 GPU-hour month"),
            std::string::npos)
      << budget;
}

// A receiver that records what each URL got and answers from a script per URL.
struct FakeReceiver {
  struct Got {
    std::string url, body, event, delivery, signature;
  };
  std::vector<Got> got;
  std::map<std::string, std::vector<int>> script;  // url -> statuses to answer, in order

  WebhookSender Sender() {
    return [this](const std::string& url,
                  const std::vector<std::pair<std::string, std::string>>& headers,
                  const std::string& body, int64_t) {
      Got g{url, body, "", "", ""};
      for (const auto& [k, v] : headers) {
        if (k == "X-Arbiter-Event") g.event = v;
        if (k == "X-Arbiter-Delivery") g.delivery = v;
        if (k == "X-Arbiter-Signature") g.signature = v;
      }
      got.push_back(g);
      auto& s = script[url];
      int status = 200;
      if (!s.empty()) {
        status = s.front();
        s.erase(s.begin());
      }
      return status == 0 ? WebhookResponse{0, "Connection"} : WebhookResponse{status, ""};
    };
  }
  std::vector<std::string> Urls() const {
    std::vector<std::string> out;
    for (const Got& g : got) out.push_back(g.url);
    return out;
  }
};

class WebhooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore(dir_.File("arbiter.db"));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    Open();
  }
  void TearDown() override {
    hooks_.reset();
    store_->Close();
  }
  // A fresh Webhooks over the store: what a restart sees.
  void Open() {
    hooks_ = std::make_unique<Webhooks>(
        store_.get(), [this] { return now_; }, nullptr);
    WebhookRetryPolicy p;
    p.base_delay_ms = 1000;
    p.max_delay_ms = 8000;
    p.max_attempts = 5;
    p.max_age_ms = 60000;
    hooks_->SetPolicy(p);
    hooks_->SetSender(receiver_.Sender());
    hooks_->SetTenantCheck([](const std::string& t) { return t == "lab" || t == "other"; });
    auto state = store_->Load();
    ASSERT_TRUE(state.ok());
    hooks_->Load(*state);
  }
  json Create(const Principal& p, json body) {
    auto r = hooks_->Create(p, body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }
  json Job(uint64_t id, const std::string& user, const std::string& tenant) {
    return {{"id", id}, {"name", "j"}, {"user", user}, {"tenant", tenant}, {"queue", "q"}};
  }
  // Runs due deliveries, advancing the clock by up to `ms` a second at a time.
  void RunFor(int64_t ms) {
    for (int64_t t = 0; t <= ms; t += 1000) {
      hooks_->RunDue();
      now_ += 1000;
    }
  }

  arbiter::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Webhooks> hooks_;
  FakeReceiver receiver_;
  TimeMs now_ = 1'700'000'000'000;
  Principal admin_{"admin", "", Role::kAdmin, "a"};
  Principal ann_{"ann", "lab", Role::kMember, "an"};
  Principal bea_{"bea", "lab", Role::kMember, "be"};
  Principal tom_{"tom", "lab", Role::kTenantAdmin, "to"};
  Principal carol_{"carol", "other", Role::kMember, "ca"};
  Principal vic_{"vic", "lab", Role::kViewer, "vi"};
};

TEST_F(WebhooksTest, AnEventGoesToTheHooksItsScopeMatches) {
  Create(ann_, {{"url", "http://ann/"}, {"events", {"job.failed", "job.succeeded"}}});
  Create(bea_, {{"url", "http://bea/"}, {"events", {"job.failed"}}});
  Create(tom_,
         {{"url", "http://lab/"}, {"events", {"job.failed", "budget.80"}}, {"scope", "tenant"}});
  Create(carol_, {{"url", "http://carol/"}, {"events", {"job.failed"}}});
  Create(admin_, {{"url", "http://all/"}, {"events", {"job.failed"}}, {"scope", "cluster"}});

  hooks_->JobEvent("job.failed", "lab", "ann", Job(1, "ann", "lab"));
  hooks_->RunDue();
  std::vector<std::string> urls = receiver_.Urls();
  std::sort(urls.begin(), urls.end());
  // Not bea's (another user's job) nor carol's (another tenant's).
  EXPECT_EQ(urls, (std::vector<std::string>{"http://all/", "http://ann/", "http://lab/"}));

  receiver_.got.clear();
  hooks_->JobEvent("job.preempted", "lab", "ann", Job(1, "ann", "lab"));  // nobody subscribes
  hooks_->BudgetUse("lab", "month", now_ - 1000, int64_t{85} * 3'600'000'000, 100);
  hooks_->RunDue();
  // A budget event goes to the tenant's hooks only, never a user's.
  EXPECT_EQ(receiver_.Urls(), (std::vector<std::string>{"http://lab/"}));
  ASSERT_EQ(receiver_.got.size(), 1u);
  const json body = json::parse(receiver_.got[0].body);
  EXPECT_EQ(body["event"], "budget.80");
  EXPECT_EQ(body["budget"]["percent"], 85);
  EXPECT_EQ(body["budget"]["gpu_hours"], 100.0);
}

TEST_F(WebhooksTest, TheBodyIsSignedAndNamesTheDelivery) {
  const json hook = Create(ann_, {{"url", "http://ann/"}, {"events", {"job.succeeded"}}});
  const std::string secret = hook["secret"];
  EXPECT_EQ(secret.rfind("whsec_", 0), 0u);
  hooks_->JobEvent("job.succeeded", "lab", "ann", Job(7, "ann", "lab"));
  hooks_->RunDue();
  ASSERT_EQ(receiver_.got.size(), 1u);
  const auto& g = receiver_.got[0];
  EXPECT_EQ(g.event, "job.succeeded");
  EXPECT_EQ(g.signature, WebhookSignature(secret, now_ / 1000, g.body));
  const json body = json::parse(g.body);
  EXPECT_EQ(body["id"], g.delivery);
  EXPECT_EQ(body["event"], "job.succeeded");
  EXPECT_EQ(body["tenant"], "lab");
  EXPECT_EQ(body["user"], "ann");
  EXPECT_EQ(body["job"]["id"], 7);
  EXPECT_TRUE(body.contains("at"));
  // The secret is never shown again.
  auto list = hooks_->List(ann_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_FALSE((*list)["items"][0].contains("secret"));
  EXPECT_EQ(list->dump().find(secret), std::string::npos);
}

TEST_F(WebhooksTest, FailedAttemptsAreRetriedWithTheSameDeliveryIdUntilDelivered) {
  const json hook = Create(ann_, {{"url", "http://ann/"}, {"events", {"job.failed"}}});
  receiver_.script["http://ann/"] = {0, 503, 429, 200};
  hooks_->JobEvent("job.failed", "lab", "ann", Job(1, "ann", "lab"));
  RunFor(30000);
  ASSERT_EQ(receiver_.got.size(), 4u);
  for (const auto& g : receiver_.got) EXPECT_EQ(g.delivery, receiver_.got[0].delivery);
  EXPECT_EQ(hooks_->pending(), 0u);
  auto log = hooks_->Deliveries(ann_, hook["id"], 10);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ((*log)["items"].size(), 1u);
  const json d = (*log)["items"][0];
  EXPECT_EQ(d["state"], "delivered");
  EXPECT_EQ(d["attempts"], 4);
  EXPECT_EQ(d["status"], 200);
  EXPECT_FALSE(d["delivered_at"].is_null());
  ASSERT_EQ(d["log"].size(), 4u);
  EXPECT_EQ(d["log"][0]["error"], "Connection");
  EXPECT_EQ(d["log"][1]["status"], 503);
  EXPECT_EQ(d["log"][2]["status"], 429);
}

TEST_F(WebhooksTest, AnotherClientErrorFailsAtOnceAndAttemptsAreBounded) {
  const json a = Create(ann_, {{"url", "http://gone/"}, {"events", {"job.failed"}}});
  const json b = Create(bea_, {{"url", "http://down/"}, {"events", {"job.failed"}}});
  receiver_.script["http://gone/"] = {410};
  receiver_.script["http://down/"] = std::vector<int>(100, 500);
  hooks_->JobEvent("job.failed", "lab", "ann", Job(1, "ann", "lab"));
  hooks_->JobEvent("job.failed", "lab", "bea", Job(2, "bea", "lab"));
  RunFor(120000);
  EXPECT_EQ(hooks_->pending(), 0u);
  auto gone = hooks_->Deliveries(ann_, a["id"], 10);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ((*gone)["items"][0]["state"], "failed");
  EXPECT_EQ((*gone)["items"][0]["attempts"], 1);
  EXPECT_EQ((*gone)["items"][0]["status"], 410);
  auto down = hooks_->Deliveries(bea_, b["id"], 10);
  ASSERT_TRUE(down.ok());
  EXPECT_EQ((*down)["items"][0]["state"], "failed");
  EXPECT_EQ((*down)["items"][0]["attempts"], 5);  // max_attempts
  EXPECT_TRUE((*down)["items"][0]["next_attempt_at"].is_null());
}

TEST_F(WebhooksTest, APendingDeliverySurvivesARestart) {
  const json hook = Create(ann_, {{"url", "http://ann/"}, {"events", {"job.failed"}}});
  receiver_.script["http://ann/"] = {0};
  hooks_->JobEvent("job.failed", "lab", "ann", Job(1, "ann", "lab"));
  hooks_->RunDue();
  ASSERT_EQ(receiver_.got.size(), 1u);
  const std::string id = receiver_.got[0].delivery;
  ASSERT_TRUE(store_->Write(store::WriteBatch()).ok());  // what was enqueued is committed
  Open();
  EXPECT_EQ(hooks_->pending(), 1u);
  RunFor(10000);
  ASSERT_EQ(receiver_.got.size(), 2u);
  EXPECT_EQ(receiver_.got[1].delivery, id);
  EXPECT_EQ(receiver_.got[1].body, receiver_.got[0].body);
  auto log = hooks_->Deliveries(ann_, hook["id"], 10);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)["items"][0]["state"], "delivered");
  EXPECT_EQ((*log)["items"][0]["attempts"], 2);
}

TEST_F(WebhooksTest, BudgetAlertsFireOncePerPeriodEvenAcrossARestart) {
  Create(tom_,
         {{"url", "http://lab/"}, {"events", {"budget.80", "budget.100"}}, {"scope", "tenant"}});
  const int64_t hour = 3'600'000'000;  // one GPU-hour in milli-GPU x ms
  const TimeMs period = now_ - 1000;
  hooks_->BudgetUse("lab", "month", period, 50 * hour, 100);
  hooks_->BudgetUse("lab", "month", period, 81 * hour, 100);
  hooks_->BudgetUse("lab", "month", period, 90 * hour, 100);
  hooks_->RunDue();
  ASSERT_EQ(receiver_.got.size(), 1u);
  EXPECT_EQ(receiver_.got[0].event, "budget.80");
  ASSERT_TRUE(store_->Write(store::WriteBatch()).ok());
  Open();
  hooks_->BudgetUse("lab", "month", period, 95 * hour, 100);
  hooks_->BudgetUse("lab", "month", period, 101 * hour, 100);
  hooks_->BudgetUse("lab", "month", period, 120 * hour, 100);
  hooks_->RunDue();
  ASSERT_EQ(receiver_.got.size(), 2u);
  EXPECT_EQ(receiver_.got[1].event, "budget.100");
  // A new period: both again, at once when the use jumps past both.
  hooks_->BudgetUse("lab", "month", now_ + 1000, 150 * hour, 100);
  hooks_->RunDue();
  ASSERT_EQ(receiver_.got.size(), 4u);
  EXPECT_EQ(receiver_.got[2].event, "budget.80");
  EXPECT_EQ(receiver_.got[3].event, "budget.100");
}

TEST_F(WebhooksTest, WhoMayCreateSeeAndDelete) {
  // Members: their own user hooks only.
  auto r =
      hooks_->Create(ann_, {{"url", "http://x/"}, {"events", {"job.failed"}}, {"scope", "tenant"}});
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  r = hooks_->Create(ann_,
                     {{"url", "http://x/"}, {"events", {"job.failed"}}, {"scope", "cluster"}});
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  r = hooks_->Create(vic_, {{"url", "http://x/"}, {"events", {"job.failed"}}});
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  // An admin's tenant hook names an existing tenant.
  r = hooks_->Create(admin_,
                     {{"url", "http://x/"}, {"events", {"job.failed"}}, {"scope", "tenant"}});
  EXPECT_EQ(r.status().field(), "tenant");
  r = hooks_->Create(
      admin_,
      {{"url", "http://x/"}, {"events", {"job.failed"}}, {"scope", "tenant"}, {"tenant", "nope"}});
  EXPECT_EQ(r.status().field(), "tenant");
  const json admin_lab = Create(
      admin_,
      {{"url", "http://x/"}, {"events", {"job.failed"}}, {"scope", "tenant"}, {"tenant", "lab"}});
  EXPECT_EQ(admin_lab["tenant"], "lab");
  // Bad bodies name their field.
  r = hooks_->Create(ann_, {{"url", "gopher://x/"}, {"events", {"job.failed"}}});
  EXPECT_EQ(r.status().field(), "url");
  r = hooks_->Create(ann_, {{"url", "http://x/"}, {"events", {"job.exploded"}}});
  EXPECT_EQ(r.status().field(), "events");
  r = hooks_->Create(ann_, {{"url", "http://x/"}, {"events", json::array()}});
  EXPECT_EQ(r.status().field(), "events");
  r = hooks_->Create(ann_, {{"url", "http://x/"}, {"events", {"job.failed"}}, {"format", "xml"}});
  EXPECT_EQ(r.status().field(), "format");
  r = hooks_->Create(ann_, {{"url", "http://x/"}, {"events", {"job.failed"}}, {"colour", "red"}});
  EXPECT_EQ(r.status().field(), "colour");

  const json ann = Create(ann_, {{"url", "http://ann/"}, {"events", {"job.failed"}}});
  const json tom =
      Create(tom_, {{"url", "http://lab/"}, {"events", {"job.failed"}}, {"scope", "tenant"}});
  auto ids = [&](const Principal& p) {
    std::vector<std::string> out;
    const json listed = *hooks_->List(p);  // kept: a range over a temporary's member dangles
    for (const json& h : listed["items"]) out.push_back(h["id"]);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(ids(ann_), (std::vector<std::string>{ann["id"].get<std::string>()}));
  EXPECT_TRUE(ids(bea_).empty());
  EXPECT_TRUE(ids(carol_).empty());
  EXPECT_EQ(ids(tom_).size(), 3u);  // ann's, its own and the admin's for lab
  EXPECT_EQ(ids(admin_).size(), 3u);
  // Another's hook looks missing.
  EXPECT_EQ(hooks_->Delete(bea_, ann["id"]).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hooks_->Deliveries(carol_, tom["id"], 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hooks_->Test(bea_, ann["id"]).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(hooks_->Delete(tom_, ann["id"]).ok());
  EXPECT_TRUE(hooks_->Delete(ann_, ann["id"]).status().code() == StatusCode::kNotFound);
}

TEST_F(WebhooksTest, ATestPingIsDeliveredAndADeletedHookGetsNothingMore) {
  const json hook =
      Create(ann_, {{"url", "http://ann/"}, {"events", {"job.failed"}}, {"format", "slack"}});
  auto ping = hooks_->Test(ann_, hook["id"]);
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  EXPECT_EQ((*ping)["event"], "ping");
  EXPECT_EQ((*ping)["state"], "pending");
  hooks_->RunDue();
  ASSERT_EQ(receiver_.got.size(), 1u);
  EXPECT_EQ(receiver_.got[0].event, "ping");
  EXPECT_EQ(receiver_.got[0].delivery, (*ping)["id"]);
  const json slack = json::parse(receiver_.got[0].body);
  EXPECT_TRUE(slack.contains("text"));
  EXPECT_EQ(slack.size(), 1u);

  receiver_.script["http://ann/"] = {500};
  hooks_->JobEvent("job.failed", "lab", "ann", Job(1, "ann", "lab"));
  hooks_->RunDue();
  ASSERT_TRUE(hooks_->Delete(ann_, hook["id"]).ok());
  EXPECT_EQ(hooks_->pending(), 0u);
  RunFor(20000);
  EXPECT_EQ(receiver_.got.size(), 2u);
  ASSERT_TRUE(store_->Write(store::WriteBatch()).ok());
  Open();
  EXPECT_EQ(hooks_->pending(), 0u);
}

// The control plane raises the approval events where its approval code moves jobs.
constexpr const char* kApprovalConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: tom, tenant: lab, role: tenant-admin}
approvals:
  - name: big-jobs
    when: {gpus_at_least: 8}
    approvers: {role: tenant-admin}
)";

class ControlPlaneWebhooksTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kApprovalConfig, "cp-webhooks");
    cp_->webhooks().SetSender(receiver_.Sender());
  }
  uint64_t SubmitAs(const Principal& p, json body) {
    body["queue"] = "lab-q";
    body["command"] = {"true"};
    auto spec = api::ParseJobSubmission(body.dump());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    bool created = false;
    auto r = cp_->SubmitJob(p, std::move(spec).value(), "", &created);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->id : 0;
  }
  std::vector<std::string> Events() {
    cp_->webhooks().RunDue();
    std::vector<std::string> out;
    for (const auto& g : receiver_.got) out.push_back(g.event);
    receiver_.got.clear();
    return out;
  }

  FakeReceiver receiver_;
  Principal ann_{"ann", "lab", Role::kMember, "an"};
  Principal tom_{"tom", "lab", Role::kTenantAdmin, "to"};
};

TEST_F(ControlPlaneWebhooksTest, ApprovalTransitionsRaiseTheirEvents) {
  auto hook = cp_->webhooks().Create(
      tom_, {{"url", "http://lab/"},
             {"scope", "tenant"},
             {"events", {"job.awaiting_approval", "job.approved", "job.rejected"}}});
  ASSERT_TRUE(hook.ok()) << hook.status().ToString();
  const uint64_t a = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}, {"name", "big"}});
  EXPECT_EQ(Events(), (std::vector<std::string>{"job.awaiting_approval"}));
  ASSERT_TRUE(cp_->DecideApproval(tom_, a, true, "ok").ok());
  EXPECT_EQ(Events(), (std::vector<std::string>{"job.approved"}));
  const uint64_t b = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}});
  ASSERT_TRUE(cp_->DecideApproval(tom_, b, false, "too big").ok());
  EXPECT_EQ(Events(), (std::vector<std::string>{"job.awaiting_approval", "job.rejected"}));
  SubmitAs(ann_, {{"resources", {{"gpus", 1}}}});  // no rule: no event
  EXPECT_TRUE(Events().empty());
}

}  // namespace
}  // namespace arbiter::server
