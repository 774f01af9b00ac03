#include "api/service_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "api/job_codec.h"
#include "api/job_template.h"
#include "api/parse_tree.h"
#include "api/value.h"
#include "model/node.h"

namespace arbiter::api {

namespace {

using nlohmann::json;

constexpr size_t kMaxHosts = 64;
constexpr size_t kMaxTrafficEntries = 100;
constexpr size_t kMaxProbePathBytes = 1024;

// Seconds with up to three decimals, as milliseconds.
Status ReadSecondsMs(const MappingReader& m, std::string_view key, int64_t lo_ms, int64_t hi_ms,
                     DurationMs* out) {
  return m.Milli(key, lo_ms, hi_ms, out);
}

Status ParseProbe(const Value& v, const std::string& path, ProbeSpec* p) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(m.Check({"path", "period_seconds", "timeout_seconds", "failure_threshold",
                                   "success_threshold", "initial_delay_seconds"}));
  ARBITER_RETURN_IF_ERROR(m.String("path", kMaxProbePathBytes, &p->path));
  if (p->path.empty() || p->path[0] != '/') {
    return InvalidArgument(m.PathOf("path"),
                           fmt::format("must start with '/', got {}", Quote(p->path)));
  }
  for (char c : p->path) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return InvalidArgument(m.PathOf("path"), "must not contain spaces or control characters");
    }
  }
  ARBITER_RETURN_IF_ERROR(ReadSecondsMs(m, "period_seconds", 100, 3'600'000, &p->period_ms));
  ARBITER_RETURN_IF_ERROR(ReadSecondsMs(m, "timeout_seconds", 100, 60'000, &p->timeout_ms));
  // Not given: the default (1 s), or the period when that is shorter.
  if (m.Get("timeout_seconds") == nullptr) p->timeout_ms = std::min(p->timeout_ms, p->period_ms);
  if (p->timeout_ms > p->period_ms) {
    return InvalidArgument(m.PathOf("timeout_seconds"),
                           fmt::format("must be at most period_seconds ({}), got {}",
                                       p->period_ms / 1000.0, p->timeout_ms / 1000.0));
  }
  ARBITER_RETURN_IF_ERROR(m.Int32("failure_threshold", 1, 100, &p->failure_threshold));
  ARBITER_RETURN_IF_ERROR(m.Int32("success_threshold", 1, 100, &p->success_threshold));
  return ReadSecondsMs(m, "initial_delay_seconds", 0, 3'600'000, &p->initial_delay_ms);
}

Status ParseHosts(const Value& v, const std::string& path, std::vector<std::string>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxHosts));
  for (size_t i = 0; i < v.items.size(); ++i) {
    const std::string ip = IndexPath(path, i);
    std::string host;
    ARBITER_RETURN_IF_ERROR(ReadString(v.items[i], ip, 253, &host));
    std::string lower;
    for (char c : host) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (!IsValidHostName(lower)) {
      return InvalidArgument(ip, fmt::format("{} is not a valid host name", Quote(host)));
    }
    for (const std::string& earlier : *out) {
      if (earlier == lower)
        return InvalidArgument(ip, fmt::format("duplicate host {}", Quote(host)));
    }
    out->push_back(std::move(lower));
  }
  return Status::Ok();
}

Status ParseTraffic(const Value& v, const std::string& path, std::vector<TrafficSplit>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxTrafficEntries));
  if (v.items.empty()) {
    return InvalidArgument(path, "must name at least one revision, with percents summing to 100");
  }
  int64_t sum = 0;
  for (size_t i = 0; i < v.items.size(); ++i) {
    MappingReader m(v.items[i], IndexPath(path, i));
    ARBITER_RETURN_IF_ERROR(m.Check({"revision", "percent"}));
    ARBITER_RETURN_IF_ERROR(m.Require("revision"));
    ARBITER_RETURN_IF_ERROR(m.Require("percent"));
    TrafficSplit t;
    ARBITER_RETURN_IF_ERROR(m.Int("revision", 1, int64_t{1} << 40, &t.revision));
    ARBITER_RETURN_IF_ERROR(m.Int32("percent", 0, 100, &t.percent));
    for (const TrafficSplit& earlier : *out) {
      if (earlier.revision == t.revision) {
        return InvalidArgument(path, fmt::format("revision {} is listed twice", t.revision));
      }
    }
    sum += t.percent;
    out->push_back(t);
  }
  if (sum != 100) {
    return InvalidArgument(path, fmt::format("percents must sum to 100, got {}", sum));
  }
  return Status::Ok();
}

Status ParseSlo(const Value& v, const std::string& path, SloSpec* s) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(m.Check({"latency_ms", "percentile", "availability"}));
  ARBITER_RETURN_IF_ERROR(m.Int("latency_ms", 1, 3'600'000, &s->latency_ms));
  int64_t milli = static_cast<int64_t>(s->percentile * 1000 + 0.5);
  ARBITER_RETURN_IF_ERROR(m.Milli("percentile", 1, 100'000, &milli));
  s->percentile = static_cast<double>(milli) / 1000.0;
  milli = static_cast<int64_t>(s->availability * 1000 + 0.5);
  ARBITER_RETURN_IF_ERROR(m.Milli("availability", 0, 100'000, &milli));
  s->availability = static_cast<double>(milli) / 1000.0;
  return Status::Ok();
}

// A rate or percentage with up to three decimals.
Status ReadMilliDouble(const MappingReader& m, std::string_view key, int64_t lo, int64_t hi,
                       double* out) {
  int64_t milli = static_cast<int64_t>(*out * 1000 + 0.5);
  ARBITER_RETURN_IF_ERROR(m.Milli(key, lo, hi, &milli));
  *out = static_cast<double>(milli) / 1000.0;
  return Status::Ok();
}

Status ParseAutoscaling(const Value& v, const std::string& path, AutoscalingSpec* a) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(
      m.Check({"metric", "target", "target_utilization", "stable_window_seconds",
               "panic_window_seconds", "panic_threshold", "max_scale_up_rate",
               "max_scale_down_rate", "scale_down_delay_seconds", "scale_to_zero_grace_seconds"}));
  std::string metric = std::string(AutoscaleMetricName(a->metric));
  ARBITER_RETURN_IF_ERROR(m.String("metric", 32, &metric));
  if (metric == "concurrency") {
    a->metric = AutoscaleMetric::kConcurrency;
  } else if (metric == "rps") {
    a->metric = AutoscaleMetric::kRps;
  } else {
    return InvalidArgument(m.PathOf("metric"),
                           fmt::format("must be concurrency or rps, got {}", Quote(metric)));
  }
  ARBITER_RETURN_IF_ERROR(ReadMilliDouble(m, "target", 10, 1'000'000'000, &a->target));
  ARBITER_RETURN_IF_ERROR(
      ReadMilliDouble(m, "target_utilization", 1000, 100'000, &a->target_utilization));
  ARBITER_RETURN_IF_ERROR(m.Milli("stable_window_seconds", 6'000, 3'600'000, &a->stable_window_ms));
  // Knative's panic window is a share of the stable one (10%: 6 s of 60 s).
  if (m.Get("panic_window_seconds") == nullptr) a->panic_window_ms = a->stable_window_ms / 10;
  ARBITER_RETURN_IF_ERROR(m.Milli("panic_window_seconds", 1'000, 3'600'000, &a->panic_window_ms));
  if (a->panic_window_ms > a->stable_window_ms) {
    return InvalidArgument(m.PathOf("panic_window_seconds"),
                           fmt::format("must be at most stable_window_seconds ({}), got {}",
                                       a->stable_window_ms / 1000.0, a->panic_window_ms / 1000.0));
  }
  ARBITER_RETURN_IF_ERROR(
      ReadMilliDouble(m, "panic_threshold", 110'000, 1'000'000, &a->panic_threshold));
  ARBITER_RETURN_IF_ERROR(
      ReadMilliDouble(m, "max_scale_up_rate", 1'001, 1'000'000'000, &a->max_scale_up_rate));
  ARBITER_RETURN_IF_ERROR(
      ReadMilliDouble(m, "max_scale_down_rate", 1'001, 1'000'000'000, &a->max_scale_down_rate));
  ARBITER_RETURN_IF_ERROR(
      m.Milli("scale_down_delay_seconds", 0, 3'600'000, &a->scale_down_delay_ms));
  return m.Milli("scale_to_zero_grace_seconds", 0, 3'600'000, &a->scale_to_zero_grace_ms);
}

// `replicas`: a count, or {min, max} (then the service autoscales).
Status ParseReplicas(const MappingReader& parent, ServiceSpec* s) {
  const Value* v = parent.Get("replicas");
  if (v == nullptr || v->kind != Value::Kind::kMapping) {
    ARBITER_RETURN_IF_ERROR(parent.Int32("replicas", 0, kMaxServiceReplicas, &s->replicas));
    if (parent.Get("autoscaling") != nullptr) {
      return InvalidArgument("replicas",
                             "a service that autoscales gives its range: replicas: {min, max}");
    }
    return Status::Ok();
  }
  MappingReader m(*v, "replicas");
  ARBITER_RETURN_IF_ERROR(m.Check({"min", "max"}));
  ARBITER_RETURN_IF_ERROR(m.Require("max"));
  ARBITER_RETURN_IF_ERROR(m.Int32("min", 0, kMaxServiceReplicas, &s->min_replicas));
  ARBITER_RETURN_IF_ERROR(m.Int32("max", 1, kMaxServiceReplicas, &s->max_replicas));
  if (s->min_replicas > s->max_replicas) {
    return InvalidArgument("replicas.min", fmt::format("must be at most max ({}), got {}",
                                                       s->max_replicas, s->min_replicas));
  }
  AutoscalingSpec a;
  if (const Value* av = parent.Get("autoscaling")) {
    ARBITER_RETURN_IF_ERROR(ParseAutoscaling(*av, "autoscaling", &a));
  }
  s->autoscaling = a;
  s->replicas = s->min_replicas;
  return Status::Ok();
}

// `stored`: the template comes from the stored form, whose secret values are kept apart.
Status ParseServiceValue(const Value& root, ServiceSpec* s) {
  MappingReader m(root, "");
  ARBITER_RETURN_IF_ERROR(
      m.Check({"name", "tenant", "queue", "priority_class", "template", "replicas", "port", "hosts",
               "readiness", "liveness", "max_concurrency", "request_queue", "rollout", "slo",
               "drain_seconds", "traffic", "autoscaling", "reclaim_deadline_seconds"}));
  ARBITER_RETURN_IF_ERROR(m.Require("name"));
  ARBITER_RETURN_IF_ERROR(m.String("name", 253, &s->name));
  if (!IsValidServiceName(s->name)) {
    return InvalidArgument("name", fmt::format("{} is not a valid service name: use lower-case "
                                               "letters, digits and '-', starting and ending with "
                                               "a letter or digit, at most {} characters",
                                               Quote(s->name), kMaxServiceNameLength));
  }
  ARBITER_RETURN_IF_ERROR(m.String("tenant", 63, &s->tenant));
  if (!s->tenant.empty() && !IsValidName(s->tenant)) {
    return InvalidArgument("tenant",
                           fmt::format("{} is not a valid tenant name", Quote(s->tenant)));
  }
  ARBITER_RETURN_IF_ERROR(m.String("queue", 63, &s->queue));
  if (!s->queue.empty() && !IsValidQueueAlias(s->queue)) {
    return InvalidArgument("queue", fmt::format("{} is not a valid queue name", Quote(s->queue)));
  }
  ARBITER_RETURN_IF_ERROR(m.String("priority_class", 63, &s->priority_class));
  if (!s->priority_class.empty() && !IsValidName(s->priority_class)) {
    return InvalidArgument("priority_class", fmt::format("{} is not a valid priority class name",
                                                         Quote(s->priority_class)));
  }
  ARBITER_RETURN_IF_ERROR(m.Require("template"));
  ARBITER_RETURN_IF_ERROR(ParseJobTemplate(*m.Get("template"), "template", &s->tmpl));
  if (s->tmpl.env.count(std::string(kServicePortEnvName)) ||
      s->tmpl.secret_env.count(std::string(kServicePortEnvName))) {
    return InvalidArgument(s->tmpl.env.count(std::string(kServicePortEnvName))
                               ? "template.env.PORT"
                               : "template.secret_env.PORT",
                           "PORT is set by Arbiter for every replica: the port it must listen on");
  }
  ARBITER_RETURN_IF_ERROR(ParseReplicas(m, s));
  ARBITER_RETURN_IF_ERROR(
      m.Int("reclaim_deadline_seconds", 0, 86'400, &s->reclaim_deadline_seconds));
  ARBITER_RETURN_IF_ERROR(m.Int32("port", 0, 65535, &s->port));
  if (const Value* v = m.Get("hosts")) ARBITER_RETURN_IF_ERROR(ParseHosts(*v, "hosts", &s->hosts));
  if (const Value* v = m.Get("readiness")) {
    ARBITER_RETURN_IF_ERROR(ParseProbe(*v, "readiness", &s->readiness));
  }
  if (const Value* v = m.Get("liveness")) {
    ProbeSpec p;
    ARBITER_RETURN_IF_ERROR(ParseProbe(*v, "liveness", &p));
    s->liveness = p;
  }
  ARBITER_RETURN_IF_ERROR(m.Int32("max_concurrency", 0, 100000, &s->max_concurrency));
  if (const Value* v = m.Get("request_queue")) {
    MappingReader q(*v, "request_queue");
    ARBITER_RETURN_IF_ERROR(q.Check({"max", "timeout_ms"}));
    ARBITER_RETURN_IF_ERROR(q.Int("max", 0, 1'000'000, &s->request_queue.max));
    ARBITER_RETURN_IF_ERROR(q.Int("timeout_ms", 1, 600'000, &s->request_queue.timeout_ms));
  }
  if (const Value* v = m.Get("rollout")) {
    MappingReader r(*v, "rollout");
    ARBITER_RETURN_IF_ERROR(r.Check({"max_surge", "max_unavailable"}));
    ARBITER_RETURN_IF_ERROR(r.Int32("max_surge", 0, 1000, &s->rollout.max_surge));
    ARBITER_RETURN_IF_ERROR(r.Int32("max_unavailable", 0, 1000, &s->rollout.max_unavailable));
    if (s->rollout.max_surge == 0 && s->rollout.max_unavailable == 0) {
      return InvalidArgument("rollout",
                             "max_surge and max_unavailable may not both be 0: a rollout could "
                             "neither add a replica nor remove one");
    }
  }
  if (const Value* v = m.Get("slo")) {
    SloSpec slo;
    ARBITER_RETURN_IF_ERROR(ParseSlo(*v, "slo", &slo));
    s->slo = slo;
  }
  ARBITER_RETURN_IF_ERROR(m.Int("drain_seconds", 0, 3600, &s->drain_seconds));
  if (const Value* v = m.Get("traffic")) {
    ARBITER_RETURN_IF_ERROR(ParseTraffic(*v, "traffic", &s->traffic));
  }
  return Status::Ok();
}

Result<Value> ParseObject(std::string_view text, bool yaml) {
  const TreeLimits limits{kMaxBodyBytes, kMaxNestingDepth, kMaxBodyValues};
  Result<Value> tree = yaml ? ParseYamlTree(text, limits, "the service")
                            : ParseJsonTree(text, limits, "the request body");
  if (!tree.ok()) return tree.status();
  if (tree->kind != Value::Kind::kMapping) {
    return InvalidArgument("", fmt::format("the body must be an object, got {}", Describe(*tree)));
  }
  return tree;
}

Result<ServiceSpec> ParseService(std::string_view text, bool yaml) {
  Result<Value> tree = ParseObject(text, yaml);
  if (!tree.ok()) return tree.status();
  ServiceSpec s;
  ARBITER_RETURN_IF_ERROR(ParseServiceValue(*tree, &s));
  return s;
}

json Seconds(DurationMs ms) {
  if (ms % 1000 == 0) return ms / 1000;
  return static_cast<double>(ms) / 1000.0;
}

json ProbeToJson(const ProbeSpec& p) {
  return {{"path", p.path},
          {"period_seconds", Seconds(p.period_ms)},
          {"timeout_seconds", Seconds(p.timeout_ms)},
          {"failure_threshold", p.failure_threshold},
          {"success_threshold", p.success_threshold},
          {"initial_delay_seconds", Seconds(p.initial_delay_ms)}};
}

// The template's fields; `secrets`: secret_env with its values (else left out).
json TemplateFields(const JobSpec& t, bool secrets) {
  json j = {{"command", t.command},
            {"env", t.env},
            {"resources",
             {{"gpus", t.resources.gpus},
              {"gpu_milli", t.resources.gpu_milli},
              {"gpu_memory_mib", t.resources.gpu_memory_mib},
              {"cpu_milli", t.resources.cpu_milli},
              {"memory_mib", t.resources.memory_mib}}},
            {"gpu_models", t.gpu_models},
            {"node_selector", t.node_selector},
            {"tolerations", json::array()}};
  for (const Toleration& tol : t.tolerations) {
    j["tolerations"].push_back({{"key", tol.key}, {"value", tol.value}});
  }
  if (!t.workdir.empty()) j["workdir"] = t.workdir;
  if (!t.container_image.empty()) j["container_image"] = t.container_image;
  for (const Mount& m : t.mounts) {
    json mj = {{"mode", MountModeName(m.read_only)}};
    if (!m.path.empty()) mj["path"] = m.path;
    if (!m.volume.empty()) mj["volume"] = m.volume;
    if (!m.target.empty()) mj["target"] = m.target;
    j["mounts"].push_back(std::move(mj));
  }
  if (t.grace_period_seconds) j["grace_period_seconds"] = *t.grace_period_seconds;
  if (secrets && !t.secret_env.empty()) j["secret_env"] = t.secret_env;
  return j;
}

json SpecFields(const ServiceSpec& s, const json& tmpl) {
  json j = {
      {"name", s.name},
      {"template", tmpl},
      {"replicas", s.replicas},
      {"port", s.port},
      {"hosts", s.hosts},
      {"readiness", ProbeToJson(s.readiness)},
      {"max_concurrency", s.max_concurrency},
      {"request_queue", {{"max", s.request_queue.max}, {"timeout_ms", s.request_queue.timeout_ms}}},
      {"rollout",
       {{"max_surge", s.rollout.max_surge}, {"max_unavailable", s.rollout.max_unavailable}}},
      {"drain_seconds", s.drain_seconds}};
  if (!s.tenant.empty()) j["tenant"] = s.tenant;
  if (!s.queue.empty()) j["queue"] = s.queue;
  if (!s.priority_class.empty()) j["priority_class"] = s.priority_class;
  if (s.liveness) j["liveness"] = ProbeToJson(*s.liveness);
  if (s.slo) {
    j["slo"] = {{"latency_ms", s.slo->latency_ms},
                {"percentile", s.slo->percentile},
                {"availability", s.slo->availability}};
  }
  if (!s.traffic.empty()) j["traffic"] = TrafficToJson(s.traffic);
  if (s.autoscaling) {
    const AutoscalingSpec& a = *s.autoscaling;
    j["replicas"] = {{"min", s.min_replicas}, {"max", s.max_replicas}};
    j["autoscaling"] = {{"metric", AutoscaleMetricName(a.metric)},
                        {"target", a.EffectiveTarget()},
                        {"target_utilization", a.target_utilization},
                        {"stable_window_seconds", Seconds(a.stable_window_ms)},
                        {"panic_window_seconds", Seconds(a.panic_window_ms)},
                        {"panic_threshold", a.panic_threshold},
                        {"max_scale_up_rate", a.max_scale_up_rate},
                        {"max_scale_down_rate", a.max_scale_down_rate},
                        {"scale_down_delay_seconds", Seconds(a.scale_down_delay_ms)},
                        {"scale_to_zero_grace_seconds", Seconds(a.scale_to_zero_grace_ms)}};
  }
  if (s.reclaim_deadline_seconds > 0) j["reclaim_deadline_seconds"] = s.reclaim_deadline_seconds;
  return j;
}

}  // namespace

Result<ServiceSpec> ParseServiceJson(std::string_view json_text) {
  return ParseService(json_text, /*yaml=*/false);
}

Result<ServiceSpec> ParseServiceYaml(std::string_view yaml) {
  return ParseService(yaml, /*yaml=*/true);
}

Result<ServiceScale> ParseScaleBody(std::string_view text) {
  Result<Value> tree = ParseObject(text, false);
  if (!tree.ok()) return tree.status();
  MappingReader m(*tree, "");
  ARBITER_RETURN_IF_ERROR(m.Check({"replicas", "min", "max"}));
  ServiceScale out;
  if (m.Get("replicas") != nullptr) {
    if (m.Get("min") != nullptr || m.Get("max") != nullptr) {
      return InvalidArgument("replicas", "give replicas, or min and max, not both");
    }
    ARBITER_RETURN_IF_ERROR(m.Int32("replicas", 0, kMaxServiceReplicas, &out.replicas));
    return out;
  }
  if (m.Get("min") == nullptr && m.Get("max") == nullptr) return m.Require("replicas");
  ARBITER_RETURN_IF_ERROR(m.Require("min"));
  ARBITER_RETURN_IF_ERROR(m.Require("max"));
  ARBITER_RETURN_IF_ERROR(m.Int32("min", 0, kMaxServiceReplicas, &out.min));
  ARBITER_RETURN_IF_ERROR(m.Int32("max", 1, kMaxServiceReplicas, &out.max));
  if (out.min > out.max) {
    return InvalidArgument("min",
                           fmt::format("must be at most max ({}), got {}", out.max, out.min));
  }
  return out;
}

Result<std::vector<TrafficSplit>> ParseTrafficBody(std::string_view text) {
  Result<Value> tree = ParseObject(text, false);
  if (!tree.ok()) return tree.status();
  MappingReader m(*tree, "");
  ARBITER_RETURN_IF_ERROR(m.Check({"traffic"}));
  ARBITER_RETURN_IF_ERROR(m.Require("traffic"));
  std::vector<TrafficSplit> out;
  ARBITER_RETURN_IF_ERROR(ParseTraffic(*m.Get("traffic"), "traffic", &out));
  return out;
}

json TrafficToJson(const std::vector<TrafficSplit>& t) {
  json out = json::array();
  for (const TrafficSplit& s : t) out.push_back({{"revision", s.revision}, {"percent", s.percent}});
  return out;
}

json TemplateToJson(const JobSpec& t) {
  json j = TemplateFields(t, false);
  if (!t.secret_env.empty()) {
    json names = json::array();
    for (const auto& [name, value] : t.secret_env) names.push_back(name);
    j["secret_env"] = names;
  }
  return j;
}

json ServiceSpecToJson(const ServiceSpec& s) {
  return SpecFields(s, TemplateFields(s.tmpl, false));
}

namespace {

json ApprovalToJson(const ServiceApproval& a) {
  return {{"state", a.state},
          {"rule", a.rule},
          {"requested_ms", a.requested_ms},
          {"decided_by", a.decided_by},
          {"decided_ms", a.decided_ms},
          {"comment", a.comment},
          {"reason", a.reason}};
}

}  // namespace

json ServiceToJson(const Service& s) {
  json j = SpecFields(s.spec, TemplateToJson(s.spec.tmpl));
  j["tenant"] = s.spec.tenant;
  j["queue"] = s.spec.queue;
  j["user"] = s.user;
  j["revision"] = s.revision;
  json revs = json::array();
  for (const ServiceRevision& r : s.revisions) {
    revs.push_back({{"revision", r.revision},
                    {"created_ms", r.created_ms},
                    {"port", r.port},
                    {"template", TemplateToJson(r.tmpl)}});
  }
  j["revisions"] = revs;
  j["traffic"] = TrafficToJson(s.traffic);
  j["created_ms"] = s.created_ms;
  j["updated_ms"] = s.updated_ms;
  if (!s.approval.state.empty()) j["approval"] = ApprovalToJson(s.approval);
  return j;
}

std::string ServiceStoredJson(const Service& s) {
  json revs = json::array();
  for (const ServiceRevision& r : s.revisions) {
    revs.push_back({{"revision", r.revision},
                    {"created_ms", r.created_ms},
                    {"port", r.port},
                    {"template", TemplateFields(r.tmpl, false)}});
  }
  json j = {{"spec", SpecFields(s.spec, TemplateFields(s.spec.tmpl, false))},
            {"user", s.user},
            {"revision", s.revision},
            {"revisions", revs},
            {"traffic", TrafficToJson(s.traffic)},
            {"created_ms", s.created_ms},
            {"updated_ms", s.updated_ms}};
  if (!s.approval.state.empty()) j["approval"] = ApprovalToJson(s.approval);
  return j.dump();
}

std::string ServiceSecretsJson(const Service& s) {
  json j = json::object();
  for (const ServiceRevision& r : s.revisions) {
    if (!r.tmpl.secret_env.empty()) j[std::to_string(r.revision)] = r.tmpl.secret_env;
  }
  return j.empty() ? std::string() : j.dump();
}

Result<Service> ParseStoredService(std::string_view spec_json, std::string_view secrets_json) {
  Service s;
  try {
    const json j = json::parse(spec_json);
    auto spec = ParseServiceJson(j.at("spec").dump());
    if (!spec.ok()) return spec.status();
    s.spec = std::move(spec).value();
    s.user = j.at("user").get<std::string>();
    s.revision = j.at("revision").get<int64_t>();
    s.created_ms = j.at("created_ms").get<int64_t>();
    s.updated_ms = j.at("updated_ms").get<int64_t>();
    const json secrets = secrets_json.empty() ? json::object() : json::parse(secrets_json);
    for (const json& r : j.at("revisions")) {
      ServiceRevision rev;
      rev.revision = r.at("revision").get<int64_t>();
      rev.created_ms = r.at("created_ms").get<int64_t>();
      rev.port = r.at("port").get<int32_t>();
      Result<Value> t = ParseJsonTree(r.at("template").dump(), TreeLimits{}, "a revision");
      if (!t.ok()) return t.status();
      ARBITER_RETURN_IF_ERROR(ParseJobTemplate(*t, "template", &rev.tmpl));
      auto sec = secrets.find(std::to_string(rev.revision));
      if (sec != secrets.end())
        rev.tmpl.secret_env = sec->get<std::map<std::string, std::string>>();
      s.revisions.push_back(std::move(rev));
    }
    for (const json& t : j.at("traffic")) {
      s.traffic.push_back({t.at("revision").get<int64_t>(), t.at("percent").get<int32_t>()});
    }
    if (const auto a = j.find("approval"); a != j.end() && a->is_object()) {
      s.approval.state = a->value("state", "");
      s.approval.rule = a->value("rule", "");
      s.approval.requested_ms = a->value("requested_ms", int64_t{0});
      s.approval.decided_by = a->value("decided_by", "");
      s.approval.decided_ms = a->value("decided_ms", int64_t{0});
      s.approval.comment = a->value("comment", "");
      s.approval.reason = a->value("reason", "");
    }
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, fmt::format("stored service unreadable: {}", e.what()));
  }
  if (!s.revisions.empty()) s.spec.tmpl = s.revisions.back().tmpl;
  return s;
}

}  // namespace arbiter::api
