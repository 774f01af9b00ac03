// Cluster and administration commands: queues, nodes, cordon/drain/uncordon, apply, tenants,
// users, priority-classes, token create, version; report (report.cc).
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "api/job_codec.h"
#include "cli/commands.h"
#include "cli/service_args.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

std::string Str(const json& j, const char* key, const char* fallback = "") {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// Fetches `path` and prints it: structured as is, else through `table`.
template <typename TableFn>
int ListCommand(const ContextPtr& ctx, const std::string& path, TableFn table) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  return table(api, *r);
}

std::string GpuText(const json& quota) {
  auto g = QuotaGpu(quota);
  return g ? Amount(json(*g)) : "-";
}

int Queues(const ContextPtr& ctx) {
  return ListCommand(ctx, "/api/v1/queues", [&](ApiClient&, const json& r) {
    const bool wide = ctx->format() == OutputFormat::kWide;
    std::vector<std::string> h = {"NAME", "TENANT",   "GPU USED", "GUARANTEED",
                                  "MAX",  "BORROWED", "PENDING",  "RUNNING"};
    if (wide) {
      for (const char* x :
           {"PARENT", "WEIGHT", "LENDING LIMIT", "CPU USED", "MEMORY USED", "DEFAULT WALLTIME"}) {
        h.push_back(x);
      }
    }
    Table t(h);
    for (const json& q : r["items"]) {
      const double used = QuotaGpu(q.value("usage", json())).value_or(0);
      const auto guaranteed = QuotaGpu(q.value("guaranteed", json()));
      const auto max = QuotaGpu(q.value("max", json()));
      Color c = Color::kNone;
      if (max && used >= *max && *max > 0) {
        c = Color::kRed;
      } else if (used > guaranteed.value_or(0)) {
        c = Color::kYellow;  // borrowing
      }
      std::vector<Cell> row = {Str(q, "name"),
                               Str(q, "tenant"),
                               Cell(Amount(json(used)), c),
                               GpuText(q.value("guaranteed", json())),
                               GpuText(q.value("max", json())),
                               GpuText(q.value("borrowed", json())),
                               std::to_string(q.value("pending", 0)),
                               std::to_string(q.value("running", 0))};
      if (wide) {
        const json& usage = q.value("usage", json::object());
        const int64_t wall = q.value("default_walltime_seconds", int64_t{0});
        row.push_back(OrDash(Str(q, "parent")));
        row.push_back(Amount(q.value("weight", json(1))));
        row.push_back(GpuText(q.value("lending_limit", json())));
        row.push_back(Amount(usage.value("cpu", json(0))));
        row.push_back(Mebibytes(usage.value("memory_mib", int64_t{0})));
        row.push_back(wall > 0 ? ShortDuration(wall) : "-");
      }
      t.AddRow(std::move(row));
    }
    t.Print(stdout, StdoutColors());
    return kExitOk;
  });
}

int Nodes(const ContextPtr& ctx) {
  return ListCommand(ctx, "/api/v1/nodes", [&](ApiClient& api, const json& r) {
    auto used = NodeGpuUsage(api);
    if (!used.ok()) return Fail(used.status());
    const bool wide = ctx->format() == OutputFormat::kWide;
    std::vector<std::string> h = {"NAME", "STATE", "MODEL", "GPUS USED", "CPU", "MEMORY", "RACK"};
    if (wide) {
      for (const char* x : {"BLOCK", "LABELS", "TAINTS", "SOURCE", "HEARTBEAT", "REASON"}) {
        h.push_back(x);
      }
    }
    Table t(h);
    for (const json& n : r["items"]) {
      const std::string state = Str(n, "state");
      const int64_t total = NodeGpuCount(n);
      const auto it = used->find(Str(n, "name"));
      const int64_t milli = it == used->end() ? 0 : it->second;
      std::vector<Cell> row = {
          Str(n, "name"),
          Cell(state, StateColor(state)),
          NodeGpuModels(n),
          total == 0 ? "-"
                     : fmt::format("{}/{}", Amount(json(static_cast<double>(milli) / 1000)), total),
          Amount(json(static_cast<double>(n.value("cpu_milli", int64_t{0})) / 1000)),
          Mebibytes(n.value("memory_mib", int64_t{0})),
          OrDash(Str(n, "rack"))};
      if (wide) {
        std::string labels;
        const json node_labels = n.value("labels", json::object());
        for (const auto& [k, v] : node_labels.items()) {
          AppendTo(&labels, ",", fmt::format("{}={}", k, v.get<std::string>()));
        }
        std::string taints;
        for (const json& x : n.value("taints", json::array())) {
          AppendTo(&taints, ",",
                   Str(x, "value").empty() ? Str(x, "key")
                                           : fmt::format("{}={}", Str(x, "key"), Str(x, "value")));
        }
        row.push_back(OrDash(Str(n, "block")));
        row.push_back(OrDash(labels));
        row.push_back(OrDash(taints));
        row.push_back(OrDash(Str(n, "source")));
        row.push_back(n.value("last_heartbeat", json()).is_string()
                          ? Age(n["last_heartbeat"]) + " ago"
                          : "-");
        row.push_back(OrDash(Str(n, "state_reason")));
      }
      t.AddRow(std::move(row));
    }
    t.Print(stdout, StdoutColors());
    return kExitOk;
  });
}

int NodeAction(const ContextPtr& ctx, const std::string& action, const std::string& name,
               const std::string& reason) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Post(fmt::format("/api/v1/nodes/{}/{}", name, action),
                    reason.empty() ? json() : json{{"reason", reason}});
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
  } else {
    const std::string state = Str(*r, "state", action == "uncordon" ? "ready" : action.c_str());
    std::printf("node %s is %s\n", name.c_str(),
                Paint(state, StateColor(state), StdoutColors()).c_str());
  }
  return kExitOk;
}

int ApplyConfig(const ContextPtr& ctx, ApiClient& api, const std::string& text,
                const std::string& file, bool dry_run, bool prune);

// The jobs of an `apply -f` file's Kubernetes Jobs and PyTorchJobs: each submitted (a new job
// every time: a job, unlike a service, is not replaced), or with `dry_run` checked only.
int SubmitManifestJobs(const ContextPtr& ctx, ApiClient& api, const std::vector<json>& jobs,
                       const std::vector<int>& lines, const std::string& file, bool dry_run) {
  Table t({"ACTION", "KIND", "NAME", "DETAIL"});
  json results = json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto where = [&](const Status& st) {
      return Status(st.code(),
                    fmt::format("{} (the manifest at line {}): {}", file, lines[i], Describe(st)),
                    st.field());
    };
    const std::string name = jobs[i].value("name", std::string());
    if (dry_run) {
      auto checked = api::ParseJobSubmission(jobs[i].dump());
      if (!checked.ok()) return Fail(where(checked.status()), kExitUsage);
      t.AddRow({Cell("submit", Color::kGreen), "job", OrDash(name), "a new job"});
      results.push_back(jobs[i]);
      continue;
    }
    auto r = api.Post("/api/v1/jobs", jobs[i]);
    if (!r.ok()) return Fail(where(r.status()));
    results.push_back(*r);
    t.AddRow({Cell("submit", Color::kGreen), "job", OrDash(name),
              fmt::format("job {}", r->value("id", uint64_t{0}))});
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(json{{"jobs", results}}, ctx->format());
    return kExitOk;
  }
  t.Print(stdout, StdoutColors());
  std::printf("%s%zu job%s %s\n", dry_run ? "dry run: " : "", jobs.size(),
              jobs.size() == 1 ? "" : "s", dry_run ? "would be submitted" : "submitted");
  return kExitOk;
}

int Apply(const ContextPtr& ctx, const std::string& file, bool dry_run, bool prune) {
  std::string text;
  if (file == "-") {
    std::stringstream s;
    s << std::cin.rdbuf();
    text = s.str();
  } else {
    std::ifstream f(file, std::ios::binary);
    if (!f) return Fail(InvalidArgument("", fmt::format("cannot read {}", file)), kExitUsage);
    std::stringstream s;
    s << f.rdbuf();
    text = s.str();
  }
  // A file may hold `kind: Service` documents beside (or instead of) the configuration.
  auto docs = SplitApplyFile(text);
  if (!docs.ok()) {
    return Fail(Status(docs.status().code(), fmt::format("{}: {}", file, Describe(docs.status()))),
                kExitUsage);
  }
  for (const std::string& w : docs->warnings) Warn(fmt::format("{}: {}", file, w));
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  if (!docs->services.empty() || !docs->jobs.empty()) {
    if (!docs->config_yaml.empty()) {
      // The configuration first (a service may name a queue it creates), with its lines where
      // they are in the file so that the server's messages point at them.
      const int code =
          ApplyConfig(ctx, api, std::string(docs->config_line - 1, '\n') + docs->config_yaml, file,
                      dry_run, prune);
      if (code != kExitOk) return code;
      std::printf("\n");
    }
    if (!docs->services.empty()) {
      const int code = ApplyServices(ctx, api, docs->services, docs->service_lines, file, dry_run);
      if (code != kExitOk || docs->jobs.empty()) return code;
      std::printf("\n");
    }
    return SubmitManifestJobs(ctx, api, docs->jobs, docs->job_lines, file, dry_run);
  }
  return ApplyConfig(ctx, api, text, file, dry_run, prune);
}

int ApplyConfig(const ContextPtr& ctx, ApiClient& api, const std::string& text,
                const std::string& file, bool dry_run, bool prune) {
  std::string path = "/api/v1/config";
  if (dry_run) path += "?dry_run=true";
  if (prune) path += dry_run ? "&prune=true" : "?prune=true";
  auto r = api.Put(path, text, "application/yaml");
  if (!r.ok()) {
    const Status& st = r.status();
    return Fail(Status(st.code(), fmt::format("{}: {}", file, Describe(st))));
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  const json& changes = (*r)["changes"];
  if (changes.empty()) {
    std::printf("no changes: the server already matches %s\n", file.c_str());
    return kExitOk;
  }
  const bool color = StdoutColors();
  Table t({"ACTION", "KIND", "NAME", "DETAIL"});
  for (const json& ch : changes) {
    const std::string a = Str(ch, "action");
    const Color col = a == "create" ? Color::kGreen : a == "delete" ? Color::kRed : Color::kYellow;
    t.AddRow({Cell(a, col), Str(ch, "kind"), Str(ch, "name"), Str(ch, "detail")});
  }
  t.Print(stdout, color);
  std::printf("%s%zu change%s %s\n", dry_run ? "dry run: " : "", changes.size(),
              changes.size() == 1 ? "" : "s", dry_run ? "would be applied" : "applied");
  // The live jobs the configuration leaves without their tenant, queue, class or node.
  const json& affected = r->value("affected_jobs", json::array());
  const int64_t total = r->value("affected_total", int64_t{0});
  if (total > 0) {
    std::printf("\n");
    Table jt({"JOB", "TENANT", "QUEUE", "USER", "STATE", "WHY"});
    for (const json& a : affected) {
      jt.AddRow({std::to_string(a.value("id", int64_t{0})), Str(a, "tenant"), Str(a, "queue"),
                 Str(a, "user"), Str(a, "state"), Str(a, "because")});
    }
    jt.Print(stdout, color);
    const int64_t more = total - static_cast<int64_t>(affected.size());
    if (more > 0) std::printf("... and %lld more\n", static_cast<long long>(more));
    if (dry_run && !prune) {
      std::printf(
          "%lld live job%s would be left behind: applying refuses unless --prune, "
          "which cancels %s\n",
          static_cast<long long>(total), total == 1 ? "" : "s", total == 1 ? "it" : "them");
    } else if (dry_run) {
      std::printf("%lld live job%s would be cancelled (--prune)\n", static_cast<long long>(total),
                  total == 1 ? "" : "s");
    } else {
      const int64_t cancelled = r->value("cancelled", int64_t{0});
      std::printf("%lld job%s cancelled (--prune)\n", static_cast<long long>(cancelled),
                  cancelled == 1 ? "" : "s");
    }
  }
  return kExitOk;
}

int ConfigGet(const ContextPtr& ctx) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Send("GET", "/api/v1/config", "", "");
  if (!r.ok()) return Fail(r.status());
  if (r->status < 200 || r->status >= 300) return Fail(api.FromReply(*r));
  if (ctx->format() == OutputFormat::kJson) {
    try {
      std::printf("%s\n", YamlToJson(YAML::Load(r->body)).dump(2).c_str());
    } catch (const YAML::Exception& e) {
      return Fail(Internal(fmt::format("the server's configuration is not YAML: {}", e.what())));
    }
    return kExitOk;
  }
  std::fputs(r->body.c_str(), stdout);
  if (!r->body.empty() && r->body.back() != '\n') std::fputc('\n', stdout);
  return kExitOk;
}

int Tenants(const ContextPtr& ctx) {
  return ListCommand(ctx, "/api/v1/tenants", [&](ApiClient&, const json& r) {
    Table t({"NAME", "QUEUES", "BUDGET"});
    for (const json& x : r["items"]) {
      std::string queues;
      for (const json& q : x.value("queues", json::array())) {
        AppendTo(&queues, ",", q.get<std::string>());
      }
      std::string budget = "-";
      if (x.contains("budget") && x["budget"].is_object()) {
        const json& b = x["budget"];
        budget = fmt::format("{} GPU-hours per {} ({} when spent)",
                             Amount(b.value("gpu_hours", json(0))), Str(b, "period"),
                             Str(b, "on_exhausted"));
      }
      t.AddRow({Str(x, "name"), OrDash(queues), budget});
    }
    t.Print(stdout, StdoutColors());
    return kExitOk;
  });
}

int Users(const ContextPtr& ctx) {
  return ListCommand(ctx, "/api/v1/users", [&](ApiClient&, const json& r) {
    Table t({"NAME", "TENANT", "ROLE"});
    for (const json& u : r["items"]) {
      t.AddRow({Str(u, "name"), OrDash(Str(u, "tenant")), Str(u, "role")});
    }
    t.Print(stdout, StdoutColors());
    return kExitOk;
  });
}

int CreateUser(const ContextPtr& ctx, const std::string& name, const std::string& tenant,
               const std::string& role) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  json body = {{"name", name}, {"role", role}};
  if (!tenant.empty()) body["tenant"] = tenant;
  auto r = api.Post("/api/v1/users", body);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
  } else {
    std::printf(
        "user %s created (tenant %s, role %s); give them a token with: arbiter token "
        "create --user %s\n",
        name.c_str(), OrDash(Str(*r, "tenant")).c_str(), Str(*r, "role").c_str(), name.c_str());
  }
  return kExitOk;
}

int PriorityClasses(const ContextPtr& ctx) {
  return ListCommand(ctx, "/api/v1/priority-classes", [&](ApiClient&, const json& r) {
    Table t({"NAME", "VALUE", "PREEMPTIBLE", "MIN RUNTIME", "GRACE", "PREEMPTS ANYWHERE"});
    for (const json& p : r["items"]) {
      t.AddRow({Str(p, "name"), std::to_string(p.value("value", int64_t{0})),
                p.value("preemptible", true) ? "yes" : "no",
                ShortDuration(p.value("min_runtime_seconds", int64_t{0})),
                ShortDuration(p.value("grace_period_seconds", int64_t{0})),
                p.value("preempts_anywhere", false) ? "yes" : "no"});
    }
    t.Print(stdout, StdoutColors());
    return kExitOk;
  });
}

struct TokenArgs {
  std::string user, role, node, expires_in, id;
  bool read_only = false;
  bool json = false;
};

// "90s", "30m", "12h", "30d", "2w" as seconds; 0 when malformed.
int64_t ParseExpiry(const std::string& s) {
  if (s.size() < 2) return 0;
  int64_t n = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || n > int64_t{1} << 40) return 0;
    n = n * 10 + (s[i] - '0');
  }
  switch (s.back()) {
    case 's':
      return n;
    case 'm':
      return n * 60;
    case 'h':
      return n * 3600;
    case 'd':
      return n * 86400;
    case 'w':
      return n * 7 * 86400;
    default:
      return 0;
  }
}

int ListTokens(const ContextPtr& ctx, bool as_json) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get("/api/v1/tokens");
  if (!r.ok()) return Fail(r.status());
  if (as_json || IsStructured(ctx->format())) {
    PrintStructured(*r, as_json ? OutputFormat::kJson : ctx->format());
    return kExitOk;
  }
  Table t({"ID", "USER", "TENANT", "ROLE", "SCOPE", "NODE", "CREATED", "EXPIRES", "STATE"});
  for (const json& k : (*r)["items"]) {
    const std::string state = Str(k, "state");
    t.AddRow({Str(k, "id"), Str(k, "user"), Str(k, "tenant").empty() ? "-" : Str(k, "tenant"),
              Str(k, "role"), Str(k, "scope", "full"),
              Str(k, "node").empty() ? "-" : Str(k, "node"), Str(k, "created_at"),
              Str(k, "expires_at").empty() ? "never" : Str(k, "expires_at"),
              Cell(state, state == "active" ? Color::kGreen : Color::kRed)});
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

int RevokeToken(const ContextPtr& ctx, const std::string& id) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Send("DELETE", "/api/v1/tokens/" + id, "", "application/json");
  if (!r.ok()) return Fail(r.status());
  if (r->status / 100 != 2) return Fail(api.FromReply(*r));
  std::printf("token %s revoked\n", id.c_str());
  return kExitOk;
}

int CreateToken(const ContextPtr& ctx, const TokenArgs& a) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  json body = json::object();
  if (!a.user.empty()) body["user"] = a.user;  // else the caller's own
  if (a.read_only) body["scope"] = "read-only";
  if (!a.role.empty()) body["role"] = a.role;
  if (!a.node.empty()) body["node"] = a.node;
  if (!a.expires_in.empty()) {
    const int64_t seconds = ParseExpiry(a.expires_in);
    if (seconds <= 0) {
      return Fail(Status(StatusCode::kInvalidArgument,
                         fmt::format("--expires-in: '{}' is not a duration such as 90m, 12h, 30d "
                                     "or 2w",
                                     a.expires_in)),
                  kExitUsage);
    }
    body["expires_in_seconds"] = seconds;
  }
  auto r = api.Post("/api/v1/tokens", body);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  std::printf("%s\n", Str(*r, "token").c_str());
  const std::string tenant = Str(*r, "tenant");
  const std::string node = Str(*r, "node");
  if (!node.empty()) {
    std::fprintf(stderr,
                 "node token for node %s: it is shown only now; start the agent with arbiter "
                 "agent --server %s --name %s --token TOKEN\n",
                 node.c_str(), c->server.c_str(), node.c_str());
    return kExitOk;
  }
  std::fprintf(stderr,
               "%stoken for %s (role %s%s): it is shown only now; use it with arbiter login "
               "--server %s --token TOKEN\n",
               Str(*r, "scope") == "read-only" ? "read-only " : "", Str(*r, "user").c_str(),
               Str(*r, "role").c_str(),
               tenant.empty() ? "" : fmt::format(", tenant {}", tenant).c_str(), c->server.c_str());
  return kExitOk;
}

void RegisterClusterViews(CLI::App& app, const ContextPtr& ctx) {
  auto* queues = app.add_subcommand(
      "queues", "Queues with GPU usage against guaranteed and max, borrowing, pending and running");
  AddClientFlags(queues, ctx);
  AddOutputFlag(queues, ctx);
  SetExamples(queues, {"arbiter queues", "arbiter queues -o wide", "arbiter queues -o json"});
  queues->callback([ctx] { ctx->Run([&] { return Queues(ctx); }); });

  auto* nodes = app.add_subcommand("nodes", "Nodes: state, GPU model, GPUs in use, capacity");
  AddClientFlags(nodes, ctx);
  AddOutputFlag(nodes, ctx);
  SetExamples(nodes, {"arbiter nodes", "arbiter nodes -o wide", "arbiter nodes -o yaml"});
  nodes->callback([ctx] { ctx->Run([&] { return Nodes(ctx); }); });

  auto node_name = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  for (const auto& [action, help] : std::vector<std::pair<std::string, std::string>>{
           {"cordon", "Stop placing new jobs on a node (running ones stay)"},
           {"drain", "Stop placing jobs on a node and let its jobs finish"},
           {"uncordon", "Place jobs on a node again"}}) {
    auto* cmd = app.add_subcommand(action, help);
    cmd->add_option("node", *node_name, "Node name")->required();
    if (action != "uncordon") {
      cmd->add_option("--reason", *reason,
                      "Why (shown by nodes -o wide and sinfo -R until it is ready again)");
    }
    AddClientFlags(cmd, ctx);
    AddOutputFlag(cmd, ctx, false);
    SetExamples(cmd, action == "uncordon"
                         ? std::vector<std::string>{"arbiter uncordon gpu-07"}
                         : std::vector<std::string>{
                               fmt::format("arbiter {} gpu-07", action),
                               fmt::format("arbiter {} gpu-07 --reason 'GPU 3 Xid 79'", action)});
    const std::string a = action;
    cmd->callback([ctx, node_name, reason, a] {
      ctx->Run([&] { return NodeAction(ctx, a, *node_name, *reason); });
    });
  }
}

void RegisterConfigCommands(CLI::App& app, const ContextPtr& ctx) {
  auto file = std::make_shared<std::string>();
  auto dry = std::make_shared<bool>(false);
  auto* apply = app.add_subcommand(
      "apply",
      "Make the server's configuration (tenants, queues, classes, users, nodes) and its "
      "services (kind: Service documents) match a YAML file; Kubernetes Deployments become "
      "services, Jobs and PyTorchJobs are submitted (docs/kubernetes.md)");
  apply->add_option("-f,--file", *file, "Configuration file (YAML; '-': stdin)")->required();
  apply->add_flag("--dry-run", *dry, "Show the changes (and the live jobs they affect) only");
  auto prune = std::make_shared<bool>(false);
  apply->add_flag("--prune", *prune,
                  "Cancel the live jobs whose tenant, queue, priority class or configured node "
                  "the file deletes (without it such a file is refused)");
  AddClientFlags(apply, ctx);
  AddOutputFlag(apply, ctx, false);
  SetExamples(apply, {"arbiter apply -f cluster.yaml --dry-run", "arbiter apply -f cluster.yaml",
                      "arbiter apply -f cluster.yaml --prune", "arbiter apply -f - < cluster.yaml",
                      "arbiter config get > cluster.yaml"});
  apply->callback(
      [ctx, file, dry, prune] { ctx->Run([&] { return Apply(ctx, *file, *dry, *prune); }); });

  auto* config = app.add_subcommand("config", "The server's configuration");
  config->require_subcommand(1);
  auto* get = config->add_subcommand(
      "get", "Print the current configuration (YAML by default; -o json), ready for apply -f");
  AddClientFlags(get, ctx);
  AddOutputFlag(get, ctx, false);
  SetExamples(get, {"arbiter config get > cluster.yaml", "arbiter config get -o json"});
  get->callback([ctx] { ctx->Run([&] { return ConfigGet(ctx); }); });

  auto* tenants = app.add_subcommand("tenants", "Tenants, their queues and budgets");
  AddClientFlags(tenants, ctx);
  AddOutputFlag(tenants, ctx, false);
  SetExamples(tenants, {"arbiter tenants", "arbiter tenants -o json"});
  tenants->callback([ctx] { ctx->Run([&] { return Tenants(ctx); }); });

  auto user_name = std::make_shared<std::string>();
  auto user_tenant = std::make_shared<std::string>();
  auto user_role = std::make_shared<std::string>("member");
  auto* users = app.add_subcommand("users", "Users and their roles; `users create` adds one");
  AddClientFlags(users, ctx);
  AddOutputFlag(users, ctx, false);
  SetExamples(users, {"arbiter users", "arbiter users create alice --tenant vision --role member"});
  auto* create_user = users->add_subcommand("create", "Create a user");
  create_user->add_option("name", *user_name, "User name")->required();
  create_user->add_option("--tenant", *user_tenant, "Tenant (default: yours)");
  create_user->add_option("--role", *user_role, "tenant-admin, member or viewer")
      ->capture_default_str();
  AddClientFlags(create_user, ctx);
  AddOutputFlag(create_user, ctx, false);
  SetExamples(create_user, {"arbiter users create alice --tenant vision",
                            "arbiter users create tina --tenant vision --role tenant-admin"});
  create_user->callback([ctx, user_name, user_tenant, user_role] {
    ctx->Run([&] { return CreateUser(ctx, *user_name, *user_tenant, *user_role); });
  });
  users->callback([ctx, users, create_user] {
    if (!users->got_subcommand(create_user)) ctx->Run([&] { return Users(ctx); });
  });

  auto* classes = app.add_subcommand("priority-classes", "Priority classes (for --priority)");
  AddClientFlags(classes, ctx);
  AddOutputFlag(classes, ctx, false);
  SetExamples(classes, {"arbiter priority-classes"});
  classes->callback([ctx] { ctx->Run([&] { return PriorityClasses(ctx); }); });
}

}  // namespace

void RegisterAuditCommand(CLI::App& app, const ContextPtr& ctx);  // audit.cc

namespace {

void RegisterTokenAndInfoCommands(CLI::App& app, const ContextPtr& ctx) {
  auto args = std::make_shared<TokenArgs>();
  auto* token = app.add_subcommand("token", "Tokens");
  token->require_subcommand(1);
  SetExamples(token, {"arbiter token create --user alice", "arbiter token list",
                      "arbiter token revoke 3f9a0c1d"});
  auto* create = token->add_subcommand(
      "create", "Create a token for a user and print it (it is shown only once)");
  create->add_option("--user", args->user, "Whose token (default: yours)");
  create->add_option("--role", args->role,
                     "A lower role than the user's (viewer), or node for an agent (admins)");
  create->add_option("--node", args->node,
                     "With --role node: the one node the token may register and speak for");
  create->add_option("--ttl,--expires-in", args->expires_in,
                     "The token stops working after this long: 90m, 12h, 30d, 2w (default: never)");
  create->add_flag("--read-only", args->read_only,
                   "The token may only read (GET and HEAD): for dashboards, reports and auditors");
  AddClientFlags(create, ctx);
  AddOutputFlag(create, ctx, false);
  SetExamples(create, {"arbiter token create --user alice",
                       "arbiter token create --user alice --ttl 30d --read-only",
                       "arbiter token create --user alice --role viewer -o json",
                       "arbiter token create --user admin --role node --node gpu-07  # for "
                       "arbiter agent --name gpu-07"});
  create->callback([ctx, args] { ctx->Run([&] { return CreateToken(ctx, *args); }); });
  auto* list = token->add_subcommand(
      "list", "Tokens you may see (your own; a tenant admin: the tenant's; an admin: all)");
  AddClientFlags(list, ctx);
  AddOutputFlag(list, ctx, false);
  list->add_flag("--json", args->json, "JSON (as -o json)");
  SetExamples(list, {"arbiter token list", "arbiter token list --json"});
  list->callback([ctx, args] { ctx->Run([&] { return ListTokens(ctx, args->json); }); });
  auto* revoke = token->add_subcommand("revoke", "Revoke a token: it stops working at once");
  revoke->add_option("id", args->id, "The token's id (arbiter token list)")->required();
  AddClientFlags(revoke, ctx);
  SetExamples(revoke, {"arbiter token revoke 3f9a0c1d"});
  revoke->callback([ctx, args] { ctx->Run([&] { return RevokeToken(ctx, args->id); }); });

  auto* version = app.add_subcommand("version", "Print the version");
  AddOutputFlag(version, ctx, false);
  SetExamples(version, {"arbiter version", "arbiter version -o json"});
  version->callback([ctx] {
    ctx->Run([&] {
      if (IsStructured(ctx->format())) {
        PrintStructured(json{{"version", ctx->version}}, ctx->format());
      } else {
        std::printf("arbiter %s\n", ctx->version.c_str());
      }
      return kExitOk;
    });
  });

  RegisterReportCommand(app, ctx);
  RegisterPlanCommands(app, ctx);
  RegisterAuditCommand(app, ctx);
}

}  // namespace

void RegisterAdminCommands(CLI::App& app, const ContextPtr& ctx) {
  RegisterClusterViews(app, ctx);
  RegisterConfigCommands(app, ctx);
  RegisterTokenAndInfoCommands(app, ctx);
}

}  // namespace arbiter::cli
