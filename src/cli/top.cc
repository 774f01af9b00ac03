// `arbiter top`: the cluster at a glance, refreshed in the terminal: GPUs per node, queues with
// usage against guaranteed and max, pending and running counts.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Milli-units as a number: whole ones as integers (8, not 8.0).
json MilliJson(int64_t milli) {
  if (milli % 1000 == 0) return milli / 1000;
  return static_cast<double>(milli) / 1000.0;
}

// One snapshot: nodes with the GPUs in use, queues as the server lists them.
Result<json> Snapshot(ApiClient& api) {
  auto nodes = api.Get("/api/v1/nodes");
  if (!nodes.ok()) return nodes.status();
  auto queues = api.Get("/api/v1/queues");
  if (!queues.ok()) return queues.status();
  auto used = NodeGpuUsage(api);
  if (!used.ok()) return used.status();
  // Services: an older server without them shows none.
  json services = json::array();
  auto svcs = api.Get("/api/v1/services");
  if (svcs.ok() && svcs->is_object() && svcs->contains("items")) services = (*svcs)["items"];
  json out = {{"nodes", json::array()}, {"queues", (*queues)["items"]}, {"services", services}};
  for (const json& n : (*nodes)["items"]) {
    const auto it = used->find(Str(n, "name"));
    out["nodes"].push_back({{"name", Str(n, "name")},
                            {"state", Str(n, "state")},
                            {"gpu_models", NodeGpuModels(n)},
                            {"gpus", NodeGpuCount(n)},
                            {"gpus_used", MilliJson(it == used->end() ? 0 : it->second)}});
  }
  return out;
}

std::string Frame(const json& snap, const std::string& server, int interval, bool color,
                  bool unicode) {
  double total = 0;
  double used = 0;
  int ready = 0;
  for (const json& n : snap["nodes"]) {
    total += n["gpus"].get<double>();
    used += n["gpus_used"].get<double>();
    ready += Str(n, "state") == "ready" ? 1 : 0;
  }
  std::set<std::string> parents;
  for (const json& q : snap["queues"]) parents.insert(Str(q, "parent"));
  int64_t pending = 0;
  int64_t running = 0;
  for (const json& q : snap["queues"]) {
    if (parents.count(Str(q, "name"))) continue;  // counted in its children
    pending += q.value("pending", int64_t{0});
    running += q.value("running", int64_t{0});
  }
  char clock[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(clock, sizeof(clock), "%H:%M:%S", std::localtime(&now));
  std::string out =
      fmt::format("{}  {}  {}{}\n", Paint("arbiter top", Color::kBold, color), server, clock,
                  interval > 0 ? fmt::format("   every {}s, Ctrl-C to quit", interval) : "");
  out += fmt::format(
      "GPUs {}/{} in use ({}%)   nodes {} ({} ready)   jobs {} running, {} pending\n\n",
      Amount(json(used)), Amount(json(total)), total > 0 ? std::lround(100 * used / total) : 0L,
      snap["nodes"].size(), ready, running, pending);
  Table nodes({"NODE", "STATE", "MODEL", "GPUS", "USED"});
  for (const json& n : snap["nodes"]) {
    const double g = n["gpus"].get<double>();
    const double u = n["gpus_used"].get<double>();
    const Color c = u >= g && g > 0 ? Color::kRed : u > 0 ? Color::kYellow : Color::kGreen;
    nodes.AddRow({Str(n, "name"), Cell(Str(n, "state"), StateColor(Str(n, "state"))),
                  Str(n, "gpu_models"), Cell(Bar(u, g, 16, unicode), c),
                  fmt::format("{}/{}", Amount(json(u)), Amount(json(g)))});
  }
  out += nodes.Render(color) + "\n";
  Table queues({"QUEUE", "TENANT", "GPU USE (of max)", "USED", "GUARANTEED", "MAX", "BORROWED",
                "PENDING", "RUNNING"});
  for (const json& q : snap["queues"]) {
    const double u = QuotaGpu(q.value("usage", json())).value_or(0);
    const auto g = QuotaGpu(q.value("guaranteed", json()));
    const auto m = QuotaGpu(q.value("max", json()));
    const double scale = m ? *m : (total > 0 ? total : 1);
    const Color c = m && u >= *m && *m > 0 ? Color::kRed
                    : u > g.value_or(0)    ? Color::kYellow
                                           : Color::kGreen;
    queues.AddRow({Str(q, "name"), Str(q, "tenant"), Cell(Bar(u, scale, 16, unicode), c),
                   Amount(json(u)), g ? Amount(json(*g)) : "-", m ? Amount(json(*m)) : "-",
                   Amount(json(QuotaGpu(q.value("borrowed", json())).value_or(0))),
                   Cell(std::to_string(q.value("pending", 0)),
                        q.value("pending", 0) > 0 ? Color::kYellow : Color::kNone),
                   std::to_string(q.value("running", 0))});
  }
  out += queues.Render(color);
  const json& services = snap.contains("services") ? snap["services"] : json::array();
  if (!services.empty()) {
    Table st({"SERVICE", "TENANT", "READY", "REVISION", "TRAFFIC", "STARTING", "DRAINING"});
    for (const json& s : services) {
      const json status = s.value("status", json::object());
      const int64_t up = status.value("ready", int64_t{0});
      const int64_t desired = status.value("desired", s.value("replicas", int64_t{0}));
      int starting = 0, draining = 0;
      for (const json& r : status.value("replicas", json::array())) {
        const std::string state = Str(r, "state");
        starting += state == "starting" || state == "pending" ? 1 : 0;
        draining += state == "draining" ? 1 : 0;
      }
      const Color c = up >= desired ? Color::kGreen : up == 0 ? Color::kRed : Color::kYellow;
      std::string traffic;
      for (const json& t : s.value("traffic", json::array())) {
        traffic +=
            fmt::format("{}{}={}", traffic.empty() ? "" : " ", t.value("revision", int64_t{0}),
                        Amount(t.value("percent", json(0))));
      }
      st.AddRow({Str(s, "name"), Str(s, "tenant"), Cell(fmt::format("{}/{}", up, desired), c),
                 std::to_string(s.value("revision", int64_t{0})), traffic.empty() ? "-" : traffic,
                 std::to_string(starting), std::to_string(draining)});
    }
    out += "\n" + st.Render(color);
  }
  return out;
}

int Top(const ContextPtr& ctx, int interval, bool once) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  if (IsStructured(ctx->format())) {
    auto snap = Snapshot(api);
    if (!snap.ok()) return Fail(snap.status());
    PrintStructured(*snap, ctx->format());
    return kExitOk;
  }
  const bool live = tty && !once;
  const bool color = StdoutColors();
  if (!live) {
    auto snap = Snapshot(api);
    if (!snap.ok()) return Fail(snap.status());
    const std::string f = Frame(*snap, c->server, 0, color, tty);
    std::fwrite(f.data(), 1, f.size(), stdout);
    return kExitOk;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::printf("\033[?1049h\033[?25l");  // the alternate screen, no cursor
  int rc = kExitOk;
  while (!g_stop) {
    auto snap = Snapshot(api);
    std::string f =
        snap.ok() ? Frame(*snap, c->server, interval, color, true)
                  : fmt::format("{}\n(retrying every {}s)\n", Describe(snap.status()), interval);
    // Clear and draw at once, so the screen does not flicker.
    f = fmt::format("\033[H\033[2J{}", f);
    std::fwrite(f.data(), 1, f.size(), stdout);
    std::fflush(stdout);
    for (int i = 0; i < interval * 10 && !g_stop; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::printf("\033[?25h\033[?1049l");
  std::fflush(stdout);
  return rc;
}

}  // namespace

void RegisterTopCommand(CLI::App& app, const ContextPtr& ctx) {
  auto interval = std::make_shared<int>(2);
  auto once = std::make_shared<bool>(false);
  auto* top = app.add_subcommand(
      "top",
      "Live cluster view: GPUs per node, queues against guaranteed and max, pending jobs, "
      "services");
  top->add_option("--interval", *interval, "Seconds between refreshes")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  top->add_flag("--once", *once, "Print one view and exit (also when stdout is not a terminal)");
  AddClientFlags(top, ctx);
  AddOutputFlag(top, ctx, false);
  SetExamples(top, {"arbiter top", "arbiter top --interval 5", "arbiter top --once",
                    "arbiter top -o json"});
  top->callback([ctx, interval, once] { ctx->Run([&] { return Top(ctx, *interval, *once); }); });
}

}  // namespace arbiter::cli
