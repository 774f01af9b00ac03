#include "gateway/gateway.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/server_list.h"
#include "gateway/balancer.h"
#include "gateway/proxy.h"
#include "gateway/routes.h"
#include "gateway/stats.h"

namespace arbiter::gateway {

namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// HOST:PORT -> the first address getaddrinfo gives (numeric addresses need no lookup).
bool ResolveReplica(const std::string& address, Replica* replica) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port)) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 ||
      res == nullptr) {
    spdlog::warn("gateway: replica address {} does not resolve: it gets no requests", address);
    return false;
  }
  std::memcpy(&replica->addr, res->ai_addr, res->ai_addrlen);
  replica->addr_len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

void RaiseOpenFilesLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// "http://HOST:PORT/" -> "http://HOST:PORT" (httplib takes scheme, host and port only).
std::string ServerBase(std::string url) {
  const size_t scheme = url.find("://");
  const size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path != std::string::npos) url.resize(path);
  return url;
}

}  // namespace

struct Gateway::Impl {
  explicit Impl(GatewayOptions o)
      : options(std::move(o)),
        threads(options.threads > 0
                    ? options.threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
        stats(threads),
        servers(options.server_url) {}

  GatewayOptions options;
  const int threads;
  Stats stats;
  std::unique_ptr<Proxy> proxy;
  std::string host;
  std::string id;
  // The servers (--server a,b,c): the one answering, moving on when it does not (several
  // servers on one store; a follower forwards the gateway's posts to the leader).
  ServerList servers;

  mutable std::mutex mu;  // guards what follows
  std::shared_ptr<const Table> table;
  uint64_t next_serial = 0;
  int64_t routes_updates = 0;
  int64_t routes_errors = 0;
  int64_t stats_posts_ok = 0;
  int64_t stats_posts_failed = 0;
  bool stopping = false;
  httplib::Client* routes_client = nullptr;  // the poll in progress, to interrupt at Stop
  std::condition_variable cv;
  bool first_table = false;

  std::thread routes_thread;
  std::thread stats_thread;
  std::thread load_thread;

  void Publish(const RouteTable& spec) {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<const Table> next =
        BuildTable(spec, table.get(), ResolveReplica, stats, threads, &next_serial);
    std::shared_ptr<const Table> previous = std::move(table);
    table = next;
    ++routes_updates;
    first_table = true;
    if (proxy) proxy->Publish(next, previous.get());
    cv.notify_all();
  }

  // Waits `ms` or until Stop; false when stopping.
  bool SleepFor(int64_t ms) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping; });
    return !stopping;
  }

  // A client of the server in use; `*url` (when given): its URL, for Failed.
  std::unique_ptr<httplib::Client> NewClient(int64_t read_timeout_ms, std::string* url = nullptr) {
    const std::string current = servers.current();
    if (url != nullptr) *url = current;
    auto c = std::make_unique<httplib::Client>(ServerBase(current));
    c->set_connection_timeout(3, 0);
    c->set_read_timeout(static_cast<time_t>(read_timeout_ms / 1000),
                        static_cast<time_t>((read_timeout_ms % 1000) * 1000));
    c->set_write_timeout(10, 0);
    c->set_keep_alive(true);
    if (!options.token.empty()) c->set_bearer_token_auth(options.token);
    return c;
  }

  // After a request to `url` failed: the next server when it did not answer, the leader when a
  // follower named it.
  void Failed(const std::string& url, const httplib::Result& r) {
    if (!r) {
      servers.Next(url);
    } else if (r->status == 503 && r->has_header(kLeaderHeader)) {
      servers.Follow(r->get_header_value(kLeaderHeader));
    }
  }

  // The long poll: the table as soon as its version passes ours; on failure, the last table
  // stays and the poll starts again after a backoff (100 ms doubling to 5 s).
  void PollRoutes() {
    int64_t version = 0;
    bool have = false;
    int64_t backoff_ms = 100;
    bool failing = false;
    std::string url;
    auto client = NewClient(options.routes_wait_ms + 15000, &url);
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) return;
        routes_client = client.get();
      }
      const int64_t wait = have ? options.routes_wait_ms : 0;
      const std::string path =
          fmt::format("/api/v1/gateway/routes?after={}&wait_ms={}", have ? version : 0, wait);
      httplib::Result r = client->Get(path);
      {
        std::lock_guard<std::mutex> lock(mu);
        routes_client = nullptr;
        if (stopping) return;
      }
      std::string error;
      if (!r) {
        error = httplib::to_string(r.error());
      } else if (r->status != 200) {
        error = fmt::format("HTTP {}: {}", r->status, r->body.substr(0, 300));
      } else {
        Result<RouteTable> parsed = ParseRouteTable(r->body);
        if (!parsed.ok()) {
          error = "the routing table is invalid: " + parsed.status().ToString();
        } else {
          if (!have || parsed->version != version) {
            spdlog::info("gateway: routing table version {} ({} services)", parsed->version,
                         parsed->services.size());
            Publish(*parsed);
          }
          version = parsed->version;
          have = true;
          backoff_ms = 100;
          if (failing) spdlog::info("gateway: the server answers again");
          failing = false;
          continue;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ++routes_errors;
      }
      if (!failing) {
        spdlog::warn("gateway: cannot get the routing table from {}: {} (keeping the last one)",
                     url, error);
      }
      failing = true;
      Failed(url, r);
      client = NewClient(options.routes_wait_ms + 15000, &url);
      if (!SleepFor(backoff_ms)) return;
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 5000);
    }
  }

  // Every stats interval: the counters since the last accepted post. A failed post is not
  // lost: the next window starts where the last accepted one ended.
  void PostStats() {
    std::string url;
    auto client = NewClient(5000, &url);
    std::map<RouteKey, RouteTotals> posted;  // the totals the server has
    int64_t window_start = WallMs();
    bool failing = false;
    bool last = false;
    while (!last) {
      last = !SleepFor(options.stats_interval_ms);
      const std::map<RouteKey, RouteTotals> now = stats.Totals();
      const int64_t window_end = WallMs();
      std::map<RouteKey, RouteTotals> window;
      for (const auto& [key, t] : now) {
        const auto before = posted.find(key);
        RouteTotals d = before == posted.end() ? t : t.Minus(before->second);
        if (d.requests > 0) window[key] = d;
      }
      const std::string body = StatsWindowJson(id, window_start, window_end, window);
      httplib::Result r = client->Post("/api/v1/gateway/stats", body, "application/json");
      const bool ok = r && r->status >= 200 && r->status < 300;
      {
        std::lock_guard<std::mutex> lock(mu);
        ++(ok ? stats_posts_ok : stats_posts_failed);
      }
      if (ok) {
        posted = now;
        window_start = window_end;
        if (failing) spdlog::info("gateway: stats posts go through again");
        failing = false;
        continue;
      }
      if (!failing) {
        spdlog::warn("gateway: cannot post stats to {}: {} (the next window includes these)", url,
                     r ? fmt::format("HTTP {}: {}", r->status, r->body.substr(0, 300))
                       : httplib::to_string(r.error()));
      }
      failing = true;
      Failed(url, r);
      client = NewClient(5000, &url);
    }
  }

  // Autoscaling's input: every 100 ms, each service's requests in flight and waiting; every load
  // interval, their mean and the requests per second since the last post, for the services with
  // any. A request waiting where no replica runs is posted within 100 ms (scale from zero).
  void PostLoad() {
    constexpr int64_t kTickMs = 100;
    std::string url;
    auto client = NewClient(3000, &url);
    struct Acc {
      double sum = 0;  // of (in flight + waiting) at each tick
      int ticks = 0;
      uint64_t requests_before = 0;
      bool has_before = false;
      int64_t waiting = 0;  // at the last tick
      bool no_replica = false;
    };
    std::map<std::string, Acc> acc;
    auto last_post = std::chrono::steady_clock::now();
    auto last_poke = last_post - std::chrono::seconds(1);
    while (SleepFor(kTickMs)) {
      std::shared_ptr<const Table> t;
      {
        std::lock_guard<std::mutex> lock(mu);
        t = table;
      }
      if (!t) continue;
      const std::map<RouteKey, RouteTotals> totals = stats.Totals();
      bool poke = false;
      for (const auto& s : t->services) {
        int64_t in_flight = 0;
        uint64_t requests = 0;
        for (auto it = totals.lower_bound({s->name, INT64_MIN});
             it != totals.end() && it->first.first == s->name; ++it) {
          in_flight += std::max<int64_t>(0, it->second.in_flight);
          requests += it->second.requests;
        }
        Acc& a = acc[s->name];
        if (!a.has_before) {
          a.requests_before = requests;
          a.has_before = true;
        }
        a.waiting = static_cast<int64_t>(s->shared->queue.size());
        a.no_replica = s->routable.empty();
        a.sum += static_cast<double>(in_flight + a.waiting);
        ++a.ticks;
        poke = poke || (a.waiting > 0 && a.no_replica);
      }
      const auto now = std::chrono::steady_clock::now();
      const double elapsed_s = std::chrono::duration<double>(now - last_post).count();
      const bool due = elapsed_s * 1000 >= static_cast<double>(options.load_interval_ms);
      if (!due && !(poke && now - last_poke >= std::chrono::milliseconds(200))) continue;
      if (!due) last_poke = now;
      nlohmann::json services = nlohmann::json::array();
      for (auto it = acc.begin(); it != acc.end();) {
        const Acc& a = it->second;
        if (t->FindByName(it->first) == nullptr) {
          it = acc.erase(it);
          continue;
        }
        uint64_t requests = 0;
        for (auto r = totals.lower_bound({it->first, INT64_MIN});
             r != totals.end() && r->first.first == it->first; ++r) {
          requests += r->second.requests;
        }
        const double concurrency = a.ticks > 0 ? a.sum / a.ticks : 0;
        const double rps =
            due ? static_cast<double>(requests - a.requests_before) / std::max(elapsed_s, 0.001)
                : 0;
        if (concurrency > 0 || rps > 0 || a.waiting > 0) {
          services.push_back({{"name", it->first},
                              {"concurrency", std::round(concurrency * 1000) / 1000},
                              {"rps", std::round(rps * 1000) / 1000},
                              {"waiting", a.waiting},
                              {"no_replica", a.no_replica}});
        }
        if (due) {
          it->second = Acc{};
          it->second.requests_before = requests;
          it->second.has_before = true;
        }
        ++it;
      }
      if (due) last_post = now;
      if (services.empty()) continue;
      const nlohmann::json body = {{"gateway", id}, {"services", services}};
      httplib::Result r = client->Post("/api/v1/gateway/load", body.dump(), "application/json");
      if (!r || r->status >= 300) {
        Failed(url, r);
        client = NewClient(3000, &url);
      }
    }
  }

  std::string MetricsText() const {
    std::shared_ptr<const Table> t;
    int64_t updates = 0;
    int64_t errors = 0;
    int64_t posts_ok = 0;
    int64_t posts_failed = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      t = table;
      updates = routes_updates;
      errors = routes_errors;
      posts_ok = stats_posts_ok;
      posts_failed = stats_posts_failed;
    }
    std::string out = RoutesPrometheusText(stats.Totals());
    out +=
        "# HELP arbiter_gateway_queue_length Requests waiting for a free replica, by service.\n"
        "# TYPE arbiter_gateway_queue_length gauge\n";
    if (t) {
      for (const auto& s : t->services) {
        out += fmt::format("arbiter_gateway_queue_length{{service=\"{}\"}} {}\n",
                           PrometheusLabel(s->name), s->shared->queue.size());
      }
    }
    out +=
        "# HELP arbiter_gateway_replicas Replicas in the routing table, by service and "
        "revision.\n# TYPE arbiter_gateway_replicas gauge\n";
    if (t) {
      for (const auto& s : t->services) {
        for (const Revision& r : s->revisions) {
          out += fmt::format("arbiter_gateway_replicas{{service=\"{}\",revision=\"{}\"}} {}\n",
                             PrometheusLabel(s->name), r.revision, r.replicas.size());
        }
      }
    }
    out += fmt::format(
        "# HELP arbiter_gateway_unknown_service_requests_total Requests for a service the "
        "routing table does not have (404).\n"
        "# TYPE arbiter_gateway_unknown_service_requests_total counter\n"
        "arbiter_gateway_unknown_service_requests_total {}\n"
        "# HELP arbiter_gateway_connections Open client connections.\n"
        "# TYPE arbiter_gateway_connections gauge\n"
        "arbiter_gateway_connections {}\n"
        "# HELP arbiter_gateway_routes_version Version of the routing table in use.\n"
        "# TYPE arbiter_gateway_routes_version gauge\n"
        "arbiter_gateway_routes_version {}\n"
        "# HELP arbiter_gateway_routes_updates_total Routing tables taken into use.\n"
        "# TYPE arbiter_gateway_routes_updates_total counter\n"
        "arbiter_gateway_routes_updates_total {}\n"
        "# HELP arbiter_gateway_routes_errors_total Failed fetches of the routing table.\n"
        "# TYPE arbiter_gateway_routes_errors_total counter\n"
        "arbiter_gateway_routes_errors_total {}\n"
        "# HELP arbiter_gateway_stats_posts_total Stats windows posted to the server, by "
        "result.\n"
        "# TYPE arbiter_gateway_stats_posts_total counter\n"
        "arbiter_gateway_stats_posts_total{{result=\"ok\"}} {}\n"
        "arbiter_gateway_stats_posts_total{{result=\"failed\"}} {}\n",
        stats.unknown_service(), proxy ? proxy->open_connections() : 0, t ? t->version : 0, updates,
        errors, posts_ok, posts_failed);
    return out;
  }
};

Gateway::Gateway(GatewayOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Gateway::~Gateway() { Stop(); }

Status Gateway::Start() {
  Impl& m = *impl_;
  const GatewayOptions& o = m.options;
  int port = 0;
  if (!SplitHostPort(o.listen, &m.host, &port)) {
    // Port 0 is allowed here (SplitHostPort wants 1-65535).
    const size_t colon = o.listen.rfind(':');
    if (colon == std::string::npos || o.listen.substr(colon + 1) != "0") {
      return InvalidArgument("listen", fmt::format("must be HOST:PORT, got \"{}\"", o.listen));
    }
    m.host = o.listen.substr(0, colon);
    if (m.host.size() > 2 && m.host.front() == '[') m.host = m.host.substr(1, m.host.size() - 2);
    if (m.host.empty()) {
      return InvalidArgument("listen", fmt::format("must be HOST:PORT, got \"{}\"", o.listen));
    }
  }
  if (o.server_url.empty() && o.routes_file.empty()) {
    return InvalidArgument("server_url", "a server URL or a routes file is required");
  }
  if (!o.routes_file.empty()) {
    std::ifstream in(o.routes_file);
    if (!in) {
      return InvalidArgument("routes_file", fmt::format("cannot read {}", o.routes_file));
    }
    std::stringstream text;
    text << in.rdbuf();
    Result<RouteTable> parsed = ParseRouteTable(text.str());
    if (!parsed.ok()) {
      return InvalidArgument("routes_file",
                             fmt::format("{}: {}", o.routes_file, parsed.status().ToString()));
    }
    m.Publish(*parsed);
  }
  RaiseOpenFilesLimit();
  ProxySettings settings;
  settings.connect_timeout_ms = o.connect_timeout_ms;
  settings.upstream_timeout_ms = o.upstream_timeout_ms;
  settings.client_idle_timeout_ms = o.client_idle_timeout_ms;
  settings.max_body_bytes = o.max_body_bytes;
  settings.eject_ms = o.eject_ms;
  auto proxy = std::make_unique<Proxy>(m.threads, settings, m.stats,
                                       [impl = impl_.get()] { return impl->MetricsText(); });
  ARBITER_RETURN_IF_ERROR(proxy->Listen(m.host, port));
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.proxy = std::move(proxy);
    if (m.table) m.proxy->Publish(m.table, nullptr);
  }
  m.proxy->Start();
  if (o.id.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    m.id = fmt::format("{}:{}", name, m.proxy->port());
  } else {
    m.id = o.id;
  }
  if (!o.server_url.empty()) {
    m.routes_thread = std::thread([&m] { m.PollRoutes(); });
    m.stats_thread = std::thread([&m] { m.PostStats(); });
    if (o.load_interval_ms > 0) m.load_thread = std::thread([&m] { m.PostLoad(); });
    // A first table before the first request, when the server answers at once.
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait_for(lock, std::chrono::seconds(2), [&] { return m.first_table; });
  }
  return Status::Ok();
}

int Gateway::port() const { return impl_->proxy ? impl_->proxy->port() : 0; }

std::string Gateway::address() const {
  const std::string& h = impl_->host;
  return h.find(':') != std::string::npos ? fmt::format("[{}]:{}", h, port())
                                          : fmt::format("{}:{}", h, port());
}

Status Gateway::SetRoutes(const std::string& json) {
  Result<RouteTable> parsed = ParseRouteTable(json);
  if (!parsed.ok()) return parsed.status();
  impl_->Publish(*parsed);
  return Status::Ok();
}

int64_t Gateway::routes_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->table ? impl_->table->version : 0;
}

std::string Gateway::metrics_text() const { return impl_->MetricsText(); }

void Gateway::Stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopping) return;
    m.stopping = true;
    if (m.routes_client != nullptr) m.routes_client->stop();
    m.cv.notify_all();
  }
  if (m.routes_thread.joinable()) m.routes_thread.join();
  if (m.stats_thread.joinable()) m.stats_thread.join();
  if (m.load_thread.joinable()) m.load_thread.join();
  std::unique_ptr<Proxy> proxy;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    proxy = std::move(m.proxy);
  }
  if (proxy) proxy->Stop();
}

}  // namespace arbiter::gateway
