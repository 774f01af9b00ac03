#include "server/quota_requests.h"

#include <fmt/format.h>

#include <cmath>

#include "common/time.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr int64_t kMaxMilli = int64_t{1000} * 1000 * 1000 * 1000 * 1000;  // as the config's
constexpr int64_t kMaxMib = int64_t{1} << 50;
constexpr int64_t kDayMs = int64_t{86400} * 1000;

Status Invalid(const std::string& field, const std::string& message) {
  return InvalidArgument(field, message);
}

// gpu, cpu: units, exact to thousandths.
Result<int64_t> Milli(const json& v, const std::string& field) {
  if (!v.is_number() || v.get<double>() < 0) {
    return Invalid(field, "must be a number of units, 0 or more (e.g. 16 or 0.5)");
  }
  const double milli = v.get<double>() * 1000;
  const double rounded = std::round(milli);
  if (std::abs(milli - rounded) > 1e-6) return Invalid(field, "is exact to thousandths at most");
  if (rounded > static_cast<double>(kMaxMilli)) return Invalid(field, "is too large");
  return static_cast<int64_t>(rounded);
}

// memory: MiB, or text with a binary suffix (Mi, Gi, Ti).
Result<int64_t> Mib(const json& v, const std::string& field) {
  const std::string hint = "must be MiB (a whole number) or text with Mi, Gi or Ti (\"512Gi\")";
  int64_t out = 0;
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
  } else if (v.is_string()) {
    const std::string t = v.get<std::string>();
    int64_t mult = 0;
    if (t.ends_with("Mi")) mult = 1;
    if (t.ends_with("Gi")) mult = 1024;
    if (t.ends_with("Ti")) mult = 1024 * 1024;
    const std::string digits = t.substr(0, t.size() < 2 ? 0 : t.size() - 2);
    if (mult == 0 || digits.empty() || digits.size() > 15 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return Invalid(field, hint);
    }
    out = std::stoll(digits) * mult;
  } else {
    return Invalid(field, hint);
  }
  if (out < 0 || out > kMaxMib) return Invalid(field, hint);
  return out;
}

json ChangesJson(const std::vector<api::ConfigChange>& changes) {
  json out = json::array();
  for (const api::ConfigChange& c : changes) {
    out.push_back({{"kind", c.kind}, {"name", c.name}, {"action", c.action}, {"detail", c.detail}});
  }
  return out;
}

std::vector<api::ConfigChange> ChangesFrom(const json& j) {
  std::vector<api::ConfigChange> out;
  if (!j.is_array()) return out;
  for (const json& c : j) {
    out.push_back(
        {c.value("kind", ""), c.value("name", ""), c.value("action", ""), c.value("detail", "")});
  }
  return out;
}

// An amount read back from its API form.
int64_t StoredAmount(const std::string& key, const json& v) {
  if (key == "memory" || key == "tasks") return v.get<int64_t>();
  return static_cast<int64_t>(std::llround(v.get<double>() * 1000));
}

}  // namespace

json QuotaAmountJson(const std::string& key, int64_t amount) {
  if (key == "memory" || key == "tasks") return amount;
  if (amount % 1000 == 0) return amount / 1000;
  return static_cast<double>(amount) / 1000;
}

Result<QuotaRequestInput> ParseQuotaRequestBody(std::string_view body, TimeMs now) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Invalid("",
                   "the body must be a JSON object: {\"queue\": \"...\", \"guaranteed\": "
                   "{\"gpu\": 16}, \"until\": \"2027-01-31\", \"reason\": \"...\"}");
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "queue" && key != "guaranteed" && key != "until" && key != "reason") {
      return Invalid(key, "unknown field; the fields are queue, guaranteed, until and reason");
    }
  }
  QuotaRequestInput in;
  const auto q = j.find("queue");
  if (q == j.end() || !q->is_string() || q->get<std::string>().empty()) {
    return Invalid("queue", "is required: the queue whose guaranteed amounts are to change");
  }
  in.queue = q->get<std::string>();

  const auto g = j.find("guaranteed");
  if (g == j.end() || !g->is_object() || g->empty()) {
    return Invalid("guaranteed",
                   "is required: the amounts wanted, e.g. {\"gpu\": 16, \"cpu\": 64, "
                   "\"memory\": \"512Gi\"}");
  }
  for (const auto& [key, value] : g->items()) {
    const std::string field = "guaranteed." + key;
    if (key == "cpu" || key == "gpu" || (key.starts_with("gpu:") && key.size() > 4)) {
      auto m = Milli(value, field);
      if (!m.ok()) return m.status();
      in.guaranteed[key] = *m;
    } else if (key == "memory") {
      auto m = Mib(value, field);
      if (!m.ok()) return m.status();
      in.guaranteed[key] = *m;
    } else {
      return Invalid(field, "unknown resource; the resources are gpu, gpu:MODEL, cpu and memory");
    }
  }

  const auto u = j.find("until");
  const std::string until_hint =
      "is required: a date (\"2027-01-31\", the end of that day, UTC), an RFC 3339 time or "
      "milliseconds since the epoch";
  if (u == j.end()) return Invalid("until", until_hint);
  if (u->is_number_integer()) {
    in.until_ms = u->get<int64_t>();
  } else if (u->is_string()) {
    const std::string text = u->get<std::string>();
    const std::optional<int64_t> ms = ParseRfc3339Ms(text);
    if (!ms) return Invalid("until", until_hint);
    in.until_ms = text.size() == 10 ? *ms + kDayMs : *ms;  // a date: until its end
  } else {
    return Invalid("until", until_hint);
  }
  if (in.until_ms <= now) return Invalid("until", "is not in the future");
  if (in.until_ms > now + kMaxQuotaRequestDays * kDayMs) {
    return Invalid("until", fmt::format("is more than {} days ahead", kMaxQuotaRequestDays));
  }

  const auto r = j.find("reason");
  if (r == j.end() || !r->is_string() || r->get<std::string>().empty()) {
    return Invalid("reason", "is required: why the queue needs it (for the admins who decide)");
  }
  in.reason = r->get<std::string>();
  if (in.reason.size() > kMaxQuotaRequestReasonBytes) {
    return Invalid("reason", fmt::format("is {} bytes; at most {}", in.reason.size(),
                                         kMaxQuotaRequestReasonBytes));
  }
  return in;
}

json QuotaRequestToJson(const QuotaRequest& r) {
  json guaranteed = json::object();
  for (const auto& [k, v] : r.guaranteed) guaranteed[k] = QuotaAmountJson(k, v);
  json out = {{"id", std::to_string(r.id)},
              {"tenant", r.tenant},
              {"queue", r.queue},
              {"user", r.user},
              {"reason", r.reason},
              {"guaranteed", guaranteed},
              {"until_ms", r.until_ms},
              {"created_ms", r.created_ms},
              {"state", r.state},
              {"decided_by", r.decided_by},
              {"decided_ms", r.decided_ms},
              {"comment", r.comment},
              {"diff", nullptr},
              {"revert", nullptr}};
  if (!r.before.empty() || !r.changes.empty()) {
    json before = json::object(), after = json::object();
    for (const auto& [k, v] : r.before) {
      before[k] = v ? QuotaAmountJson(k, *v) : json(nullptr);
      auto a = r.guaranteed.find(k);
      if (a != r.guaranteed.end()) after[k] = QuotaAmountJson(k, a->second);
    }
    out["diff"] = {{"before", before}, {"after", after}, {"changes", ChangesJson(r.changes)}};
  }
  if (r.reverted_ms > 0) {
    out["revert"] = {
        {"at_ms", r.reverted_ms}, {"changes", ChangesJson(r.revert_changes)}, {"kept", r.kept}};
  }
  return out;
}

Result<QuotaRequest> QuotaRequestFromJson(std::string_view text) {
  QuotaRequest r;
  try {
    const json j = json::parse(text);
    r.id = std::stoull(j.at("id").get<std::string>());
    r.tenant = j.at("tenant").get<std::string>();
    r.queue = j.at("queue").get<std::string>();
    r.user = j.at("user").get<std::string>();
    r.reason = j.value("reason", "");
    for (const auto& [k, v] : j.at("guaranteed").items()) r.guaranteed[k] = StoredAmount(k, v);
    r.until_ms = j.at("until_ms").get<int64_t>();
    r.created_ms = j.value("created_ms", int64_t{0});
    r.state = j.at("state").get<std::string>();
    r.decided_by = j.value("decided_by", "");
    r.decided_ms = j.value("decided_ms", int64_t{0});
    r.comment = j.value("comment", "");
    if (const auto d = j.find("diff"); d != j.end() && d->is_object()) {
      for (const auto& [k, v] : d->at("before").items()) {
        r.before[k] = v.is_null() ? std::nullopt : std::optional<int64_t>(StoredAmount(k, v));
      }
      r.changes = ChangesFrom(d->value("changes", json::array()));
    }
    if (const auto v = j.find("revert"); v != j.end() && v->is_object()) {
      r.reverted_ms = v->value("at_ms", int64_t{0});
      r.revert_changes = ChangesFrom(v->value("changes", json::array()));
      r.kept = v->value("kept", std::vector<std::string>{});
    }
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal,
                  fmt::format("stored quota request unreadable: {}", e.what()));
  }
  return r;
}

}  // namespace arbiter::server
