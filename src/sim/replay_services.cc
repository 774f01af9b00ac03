#include "sim/replay_services.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "api/service_codec.h"
#include "sim/replay.h"
#include "sim/replay_math.h"
#include "sim/text.h"
#include "sim/trace.h"

namespace arbiter::sim {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool ParseInt(std::string_view s, int64_t* out) {
  s = Trim(s);
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" as ms since the epoch (the fraction cut to ms).
bool ParseTimestamp(std::string_view s, TimeMs* out) {
  s = Trim(s);
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':') {
    return false;
  }
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!ParseInt(s.substr(0, 4), &y) || !ParseInt(s.substr(5, 2), &mo) ||
      !ParseInt(s.substr(8, 2), &d) || !ParseInt(s.substr(11, 2), &h) ||
      !ParseInt(s.substr(14, 2), &mi) || !ParseInt(s.substr(17, 2), &sec)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return false;
  int64_t ms = 0;
  if (s.size() > 19) {
    if (s[19] != '.') return false;
    std::string_view frac = s.substr(20);
    if (frac.empty()) return false;
    int64_t scale = 100;
    for (char c : frac) {
      if (c < '0' || c > '9') return false;
      ms += (c - '0') * scale;
      scale /= 10;
    }
  }
  *out = ((DaysFromCivil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + sec * 1000 + ms;
  return true;
}

}  // namespace

Result<std::vector<TraceRequest>> LoadAzureRequests(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  std::vector<TraceRequest> out;
  int col_time = -1, col_ctx = -1, col_gen = -1;
  size_t line_no = 0;
  TimeMs first = 0;
  std::string_view rest = *text;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    line = Trim(line);
    if (line.empty()) continue;
    const std::vector<std::string_view> f = SplitFields(line, ',');
    if (col_time < 0) {
      for (size_t i = 0; i < f.size(); ++i) {
        const std::string_view name = Trim(f[i]);
        if (name == "TIMESTAMP") col_time = static_cast<int>(i);
        if (name == "ContextTokens") col_ctx = static_cast<int>(i);
        if (name == "GeneratedTokens") col_gen = static_cast<int>(i);
      }
      if (col_time < 0 || col_ctx < 0 || col_gen < 0) {
        return InvalidArgument(fmt::format("{}:{}", path, line_no),
                               "the header must name TIMESTAMP, ContextTokens and "
                               "GeneratedTokens");
      }
      continue;
    }
    auto where = [&](std::string_view col) { return fmt::format("{}:{}: {}", path, line_no, col); };
    const size_t need = static_cast<size_t>(std::max({col_time, col_ctx, col_gen}));
    if (f.size() <= need) {
      return InvalidArgument(fmt::format("{}:{}", path, line_no),
                             fmt::format("{} fields, the header has {}", f.size(), need + 1));
    }
    TraceRequest r;
    TimeMs at = 0;
    if (!ParseTimestamp(f[static_cast<size_t>(col_time)], &at)) {
      return InvalidArgument(where("TIMESTAMP"), "must be YYYY-MM-DD HH:MM:SS[.fraction]");
    }
    if (!ParseInt(f[static_cast<size_t>(col_ctx)], &r.context_tokens) || r.context_tokens < 0) {
      return InvalidArgument(where("ContextTokens"), "must be an integer >= 0");
    }
    if (!ParseInt(f[static_cast<size_t>(col_gen)], &r.generated_tokens) || r.generated_tokens < 0) {
      return InvalidArgument(where("GeneratedTokens"), "must be an integer >= 0");
    }
    if (out.empty()) first = at;
    r.at = at - first;
    out.push_back(r);
  }
  if (col_time < 0) return InvalidArgument(path, "empty: no header");
  // The file is in time order; a few rows out of order are put in place, equal times kept.
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.at < b.at; });
  if (!out.empty() && out.front().at < 0) {
    const TimeMs shift = out.front().at;
    for (TraceRequest& r : out) r.at -= shift;
  }
  return out;
}

std::vector<ServiceRequest> PlaceRequests(const std::vector<TraceRequest>& trace, TimeMs start,
                                          const RequestModel& model) {
  std::vector<ServiceRequest> out;
  out.reserve(trace.size());
  const double base = static_cast<double>(start) + model.offset_seconds * 1000.0;
  for (const TraceRequest& t : trace) {
    ServiceRequest r;
    // arrival = start + offset + at / compress
    r.arrival =
        static_cast<TimeMs>(std::llround(base + static_cast<double>(t.at) / model.compress));
    const double prefill = model.prefill_ms_per_token * static_cast<double>(t.context_tokens);
    const double decode = model.decode_ms_per_token * static_cast<double>(t.generated_tokens);
    r.prefill_ms = static_cast<DurationMs>(std::llround(prefill));
    r.service_ms = std::max<DurationMs>(1, static_cast<DurationMs>(std::llround(prefill + decode)));
    out.push_back(r);
  }
  return out;
}

RequestQueue::RequestQueue(const std::vector<ServiceRequest>* requests, int32_t max_concurrency,
                           int64_t queue_max, DurationMs queue_timeout, DurationMs slo_ms,
                           TimeMs start)
    : requests_(requests),
      max_concurrency_(max_concurrency),
      queue_max_(queue_max),
      timeout_(queue_timeout),
      slo_ms_(slo_ms),
      now_(start),
      sample_from_(start) {}

int64_t RequestQueue::Slots() const {
  if (ready_ <= 0) return 0;
  if (max_concurrency_ <= 0) return std::numeric_limits<int64_t>::max();
  return int64_t{ready_} * max_concurrency_;
}

void RequestQueue::Integrate(TimeMs t) {
  if (t <= now_) return;
  sample_integral_ +=
      static_cast<double>(busy_.size() + waiting_.size()) * static_cast<double>(t - now_);
  now_ = t;
}

// Waiting requests take free slots at t, oldest first.
void RequestQueue::Start(TimeMs t) {
  const int64_t slots = Slots();
  while (!waiting_.empty() && static_cast<int64_t>(busy_.size()) < slots) {
    const ServiceRequest& r = (*requests_)[waiting_.front()];
    waiting_.pop_front();
    const DurationMs wait = t - r.arrival;
    busy_.push(t + r.service_ms);
    ++out_.served;
    // Within the SLO: the first token (after the wait and the prefill) within slo.latency_ms.
    if (wait + r.prefill_ms <= slo_ms_) ++out_.within_slo;
    out_.wait_seconds.push_back(replay_math::Seconds(wait));
    out_.latency_seconds.push_back(replay_math::Seconds(wait + r.service_ms));
  }
}

void RequestQueue::AdvanceTo(TimeMs t) {
  constexpr TimeMs kNone = std::numeric_limits<TimeMs>::max();
  while (true) {
    // The next event before t: a completion, then a timeout, then an arrival (ties in that
    // order: a slot freed at t takes a request that would give up at t).
    const TimeMs done = busy_.empty() ? kNone : busy_.top();
    const TimeMs expiry = waiting_.empty() || timeout_ <= 0
                              ? kNone
                              : (*requests_)[waiting_.front()].arrival + timeout_;
    const TimeMs arrival = next_ < requests_->size() ? (*requests_)[next_].arrival : kNone;
    const TimeMs e = std::min({done, expiry, arrival});
    if (e >= t) break;
    Integrate(e);
    if (done == e) {
      while (!busy_.empty() && busy_.top() == e) busy_.pop();
    } else if (expiry == e) {
      while (!waiting_.empty() && (*requests_)[waiting_.front()].arrival + timeout_ <= e) {
        waiting_.pop_front();
        ++out_.timed_out;
      }
    } else {
      ++out_.arrived;
      ++sample_arrivals_;
      if (queue_max_ > 0 && static_cast<int64_t>(waiting_.size()) >= queue_max_) {
        ++out_.rejected;
      } else {
        waiting_.push_back(next_);
      }
      ++next_;
    }
    Start(e);
  }
  Integrate(t);
}

void RequestQueue::SetReady(int32_t ready) {
  ready_ = ready;
  Start(now_);
}

core::AutoscaleSample RequestQueue::TakeSample() {
  core::AutoscaleSample s;
  s.at_ms = now_;
  const double span = static_cast<double>(now_ - sample_from_);
  s.concurrency = span > 0 ? sample_integral_ / span : 0;
  s.rps = span > 0 ? static_cast<double>(sample_arrivals_) * 1000.0 / span : 0;
  sample_from_ = now_;
  sample_integral_ = 0;
  sample_arrivals_ = 0;
  return s;
}

RequestOutcomes RequestQueue::Outcomes() const {
  RequestOutcomes o = out_;
  o.waiting_at_end = static_cast<int64_t>(waiting_.size());
  return o;
}

Result<std::vector<ServiceSpec>> LoadServiceSpecs(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  // Documents: cut at lines that are `---`; a top-level `kind: Service` line is dropped (the
  // API's object has no kind).
  std::vector<std::string> docs(1);
  std::string_view rest = *text;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const std::string_view t = Trim(line);
    if (t == "---") {
      docs.emplace_back();
      continue;
    }
    if (!line.empty() && line[0] != ' ' && t.substr(0, 5) == "kind:") {
      const std::string_view kind = Trim(t.substr(5));
      if (kind != "Service" && kind != "service") {
        return InvalidArgument(fmt::format("{}: kind", path),
                               fmt::format("must be Service, got '{}'", kind));
      }
      continue;
    }
    docs.back().append(line);
    docs.back() += '\n';
  }
  std::vector<ServiceSpec> out;
  for (const std::string& d : docs) {
    const std::string_view body = Trim(d);
    if (body.empty() || body.find_first_not_of(" \t\r\n") == std::string_view::npos) continue;
    bool comment_only = true;
    for (std::string_view r = body; !r.empty();) {
      const size_t nl = r.find('\n');
      const std::string_view l = Trim(r.substr(0, nl));
      r = nl == std::string_view::npos ? std::string_view() : r.substr(nl + 1);
      if (!l.empty() && l[0] != '#') comment_only = false;
    }
    if (comment_only) continue;
    auto spec = body.front() == '{' ? api::ParseServiceJson(body) : api::ParseServiceYaml(body);
    if (!spec.ok()) {
      const Status& st = spec.status();
      const std::string where = fmt::format("{}: services[{}]", path, out.size());
      return InvalidArgument(st.field().empty() ? where : fmt::format("{}.{}", where, st.field()),
                             st.message());
    }
    out.push_back(std::move(*spec));
  }
  if (out.empty()) return InvalidArgument(path, "holds no service");
  return out;
}

std::string ServiceQueueName(const ServiceSpec& spec) {
  return spec.queue.empty() ? spec.name : spec.queue;
}

int64_t ReplicaGpuMilli(const ServiceSpec& spec) { return spec.tmpl.resources.total_gpu_milli(); }

namespace {

int32_t MostReplicas(const ServiceSpec& s) {
  return s.autoscaling.has_value() ? s.max_replicas : s.replicas;
}

}  // namespace

void AddServiceQueues(const std::vector<ServiceSpec>& services, int64_t capacity_milli,
                      std::vector<QueueSpec>* specs) {
  auto find = [&](const std::string& name) {
    return std::find_if(specs->begin(), specs->end(),
                        [&](const QueueSpec& q) { return q.name == name; });
  };
  std::vector<QueueSpec> added;
  int64_t reserved = 0;
  for (const ServiceSpec& s : services) {
    const std::string queue = ServiceQueueName(s);
    const bool known = find(queue) != specs->end() ||
                       std::any_of(added.begin(), added.end(),
                                   [&](const QueueSpec& q) { return q.name == queue; });
    const int64_t g = int64_t{MostReplicas(s)} * ReplicaGpuMilli(s);
    if (known) {
      // A second service of a queue added here adds its replicas to that queue's guarantee.
      for (QueueSpec& q : added) {
        if (q.name == queue && !q.is_tenant) {
          q.quota["gpu"].guaranteed = q.quota["gpu"].guaranteed.value_or(0) + g;
          reserved += g;
        }
      }
      continue;
    }
    const std::string tenant = s.tenant.empty() ? "serving" : s.tenant;
    if (find(tenant) == specs->end() &&
        std::none_of(added.begin(), added.end(),
                     [&](const QueueSpec& q) { return q.name == tenant; })) {
      QueueSpec t;
      t.name = tenant;
      t.is_tenant = true;
      added.push_back(std::move(t));
    }
    QueueSpec q;
    q.name = queue;
    q.parent = tenant;
    q.quota["gpu"] = QuotaLimits{g, std::nullopt, std::nullopt};
    reserved += g;
    added.push_back(std::move(q));
  }
  reserved = std::min(reserved, capacity_milli);
  if (capacity_milli > 0 && reserved > 0) {
    for (QueueSpec& q : *specs) {
      auto it = q.quota.find("gpu");
      if (it == q.quota.end() || !it->second.guaranteed.has_value()) continue;
      // G'(q) = floor(G(q) x (capacity - reserved) / capacity)
      *it->second.guaranteed = static_cast<int64_t>(replay_math::Int128{*it->second.guaranteed} *
                                                    (capacity_milli - reserved) / capacity_milli);
    }
  }
  specs->insert(specs->end(), added.begin(), added.end());
}

std::vector<std::string> ApplyReclaimDeadlines(const std::vector<ServiceSpec>& services,
                                               const Trace& trace,
                                               const std::vector<PriorityClass>& classes,
                                               std::vector<QueueSpec>* /*specs*/) {
  std::vector<std::string> lines;
  for (const ServiceSpec& s : services) {
    const std::string queue = ServiceQueueName(s);
    if (s.reclaim_deadline_seconds <= 0) {
      lines.push_back("lends its idle guarantee (no reclaim deadline)");
      continue;
    }
    // The trace's classes that are slower to stop than the deadline: their jobs do not borrow.
    std::set<std::string> slower;
    for (const TraceJob& j : trace.jobs) {
      if (j.queue == queue) continue;
      for (const PriorityClass& c : classes) {
        if (c.name == j.priority_class && c.grace_period_seconds > s.reclaim_deadline_seconds) {
          slower.insert(fmt::format("{} ({} s)", c.name, c.grace_period_seconds));
        }
      }
    }
    lines.push_back(
        slower.empty()
            ? fmt::format("lends its idle guarantee to jobs whose grace period is within {} s: "
                          "every borrower's is",
                          s.reclaim_deadline_seconds)
            : fmt::format("lends its idle guarantee only to jobs whose grace period is within {} "
                          "s: not to classes {}",
                          s.reclaim_deadline_seconds, fmt::join(slower, ", ")));
  }
  return lines;
}

Status CompileServices(const std::vector<ServiceSpec>& services,
                       std::vector<std::vector<ServiceRequest>> requests,
                       const std::vector<std::string>& lending,
                       const std::vector<PriorityClass>& classes, ReplayWorkload* w) {
  const core::QuotaTree& tree = *w->tree;
  const core::Cluster& cluster = *w->cluster;
  for (size_t i = 0; i < services.size(); ++i) {
    const ServiceSpec& s = services[i];
    const std::string field = fmt::format("services[{}]", i);
    ReplayService rs;
    rs.name = s.name;
    const std::string queue = ServiceQueueName(s);
    QueueId q;
    if (!tree.Find(queue, &q) || tree.node(q).is_tenant || !tree.node(q).is_leaf()) {
      return InvalidArgument(field + ".queue",
                             fmt::format("'{}' is not a leaf queue of the queue tree", queue));
    }
    auto known = std::find_if(w->queues.begin(), w->queues.end(),
                              [&](const ReplayQueue& rq) { return rq.id == q; });
    if (known == w->queues.end()) {
      ReplayQueue rq;
      rq.id = q;
      rq.name = queue;
      rq.tenant = tree.node(tree.node(q).tenant).name;
      rq.guaranteed_gpu_milli = replay_math::Entitlement(tree.node(q), cluster);
      w->queues.push_back(std::move(rq));
      known = w->queues.end() - 1;
    }
    rs.queue = static_cast<uint32_t>(known - w->queues.begin());
    // A replica is never preempted unless its priority class says it may be (as the server).
    core::PendingJob& p = rs.replica;
    p.queue = q;
    p.type = JobType::kService;
    p.tasks = 1;
    p.resources = s.tmpl.resources;
    p.preemptible = false;
    p.spread = static_cast<uint32_t>(i + 1);
    p.spread_distinct = s.port != 0;
    rs.min_runtime = 0;
    rs.grace_period = SecondsToMs(30);
    if (!s.priority_class.empty()) {
      auto cls = std::find_if(classes.begin(), classes.end(),
                              [&](const PriorityClass& c) { return c.name == s.priority_class; });
      if (cls == classes.end()) {
        return InvalidArgument(field + ".priority_class",
                               fmt::format("unknown class '{}'", s.priority_class));
      }
      p.priority = cls->value;
      p.preemptible = cls->preemptible;
      p.preempts_anywhere = cls->preempts_anywhere;
      rs.min_runtime = SecondsToMs(cls->min_runtime_seconds);
      rs.grace_period = SecondsToMs(cls->grace_period_seconds);
    }
    if (s.tmpl.preemptible.has_value()) p.preemptible = *s.tmpl.preemptible;
    for (const std::string& name : s.tmpl.gpu_models) {
      const GpuModelId m = cluster.FindModel(name);
      if (m == core::kNoModel) {
        return InvalidArgument(field + ".template.gpu_models",
                               fmt::format("the cluster has no GPU model '{}'", name));
      }
      p.models.push_back(m);
    }
    rs.autoscaled = s.autoscaling.has_value();
    rs.replicas = s.replicas;
    rs.min_replicas = rs.autoscaled ? s.min_replicas : s.replicas;
    rs.max_replicas = rs.autoscaled ? s.max_replicas : s.replicas;
    if (rs.autoscaled) {
      rs.autoscaling = *s.autoscaling;
      rs.replicas = std::clamp(s.replicas, rs.min_replicas, rs.max_replicas);
    }
    rs.max_concurrency = s.max_concurrency;
    rs.request_queue = s.request_queue;
    rs.slo_ms = s.slo.has_value() ? s.slo->latency_ms : SloSpec{}.latency_ms;
    rs.reclaim_deadline_seconds = s.reclaim_deadline_seconds;
    rs.lending = i < lending.size() ? lending[i] : std::string();
    if (i < requests.size()) rs.requests = std::move(requests[i]);
    w->services.push_back(std::move(rs));
  }
  return Status::Ok();
}

}  // namespace arbiter::sim
