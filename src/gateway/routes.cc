#include "gateway/routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace arbiter::gateway {

namespace {

using nlohmann::json;

Status Bad(const std::string& field, const std::string& message) {
  return InvalidArgument(field, message);
}

// An integer field (absent: `fallback`) within [lo, hi].
Status ReadInt(const json& o, const char* key, const std::string& path, int64_t lo, int64_t hi,
               int64_t* out) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    return Bad(path + key, "must be an integer");
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Bad(path + key, fmt::format("must be {}-{}, got {}", lo, hi, v));
  *out = v;
  return Status::Ok();
}

Status ReadString(const json& o, const char* key, const std::string& path, bool required,
                  std::string* out) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    return required ? Bad(path + key, "is required") : Status::Ok();
  }
  if (!it->is_string()) return Bad(path + key, "must be a string");
  *out = it->get<std::string>();
  if (required && out->empty()) return Bad(path + key, "must not be empty");
  return Status::Ok();
}

Status ParseRevision(const json& r, const std::string& path, RevisionRoute* out) {
  if (!r.is_object()) return Bad(path.substr(0, path.size() - 1), "must be an object");
  ARBITER_RETURN_IF_ERROR(ReadInt(r, "revision", path, 0, INT64_MAX, &out->revision));
  if (const auto p = r.find("percent"); p != r.end() && !p->is_null()) {
    if (!p->is_number()) return Bad(path + "percent", "must be a number");
    out->percent = p->get<double>();
    if (!(out->percent >= 0 && out->percent <= 100)) {
      return Bad(path + "percent", "must be 0-100");
    }
  }
  const auto reps = r.find("replicas");
  if (reps == r.end() || reps->is_null()) return Status::Ok();
  if (!reps->is_array()) return Bad(path + "replicas", "must be an array");
  for (size_t i = 0; i < reps->size(); ++i) {
    const json& x = (*reps)[i];
    const std::string rp = fmt::format("{}replicas[{}].", path, i);
    if (!x.is_object()) return Bad(rp.substr(0, rp.size() - 1), "must be an object");
    ReplicaRoute rep;
    ARBITER_RETURN_IF_ERROR(ReadString(x, "id", rp, true, &rep.id));
    ARBITER_RETURN_IF_ERROR(ReadString(x, "address", rp, true, &rep.address));
    std::string host;
    int port = 0;
    if (!SplitHostPort(rep.address, &host, &port)) {
      return Bad(rp + "address", fmt::format("must be HOST:PORT, got \"{}\"", rep.address));
    }
    out->replicas.push_back(std::move(rep));
  }
  return Status::Ok();
}

Status ParseService(const json& s, const std::string& path, ServiceRoute* out) {
  if (!s.is_object()) return Bad(path.substr(0, path.size() - 1), "must be an object");
  ARBITER_RETURN_IF_ERROR(ReadString(s, "name", path, true, &out->name));
  ARBITER_RETURN_IF_ERROR(ReadString(s, "tenant", path, false, &out->tenant));
  ARBITER_RETURN_IF_ERROR(ReadInt(s, "max_concurrency", path, 0, 100000000, &out->max_concurrency));
  ARBITER_RETURN_IF_ERROR(ReadInt(s, "queue_max", path, 0, 100000000, &out->queue_max));
  ARBITER_RETURN_IF_ERROR(
      ReadInt(s, "queue_timeout_ms", path, 0, int64_t{1} << 40, &out->queue_timeout_ms));
  if (const auto h = s.find("hosts"); h != s.end() && !h->is_null()) {
    if (!h->is_array()) return Bad(path + "hosts", "must be an array of strings");
    for (size_t i = 0; i < h->size(); ++i) {
      if (!(*h)[i].is_string() || (*h)[i].get<std::string>().empty()) {
        return Bad(fmt::format("{}hosts[{}]", path, i), "must be a non-empty string");
      }
      out->hosts.push_back(NormalizeHost((*h)[i].get<std::string>()));
    }
  }
  const auto revs = s.find("revisions");
  if (revs == s.end() || revs->is_null()) return Status::Ok();
  if (!revs->is_array()) return Bad(path + "revisions", "must be an array");
  for (size_t i = 0; i < revs->size(); ++i) {
    RevisionRoute rev;
    ARBITER_RETURN_IF_ERROR(
        ParseRevision((*revs)[i], fmt::format("{}revisions[{}].", path, i), &rev));
    out->revisions.push_back(std::move(rev));
  }
  return Status::Ok();
}

}  // namespace

bool SplitHostPort(std::string_view address, std::string* host, int* port) {
  size_t colon = 0;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return false;
    }
    *host = std::string(address.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == std::string_view::npos) return false;
    *host = std::string(address.substr(0, colon));
    if (host->find(':') != std::string::npos) return false;  // a bare IPv6 address
  }
  const std::string_view p = address.substr(colon + 1);
  if (host->empty() || p.empty() || p.size() > 5 ||
      !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *port = std::stoi(std::string(p));
  return *port >= 1 && *port <= 65535;
}

std::string NormalizeHost(std::string_view host) {
  std::string_view h = host;
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    if (close != std::string_view::npos) h = h.substr(0, close + 1);
  } else if (const size_t colon = h.find(':');
             colon != std::string_view::npos && h.find(':', colon + 1) == std::string_view::npos) {
    h = h.substr(0, colon);
  }
  while (!h.empty() && h.back() == '.') h.remove_suffix(1);  // "example.com." names the same
  std::string out(h);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<RouteTable> ParseRouteTable(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return Bad("", fmt::format("the routing table is not JSON: {}", e.what()));
  }
  if (!doc.is_object()) return Bad("", "the routing table must be a JSON object");
  RouteTable table;
  ARBITER_RETURN_IF_ERROR(ReadInt(doc, "version", "", 0, INT64_MAX, &table.version));
  const auto services = doc.find("services");
  if (services == doc.end() || services->is_null()) return table;
  if (!services->is_array()) return Bad("services", "must be an array");
  std::set<std::string> names;
  std::set<std::string> hosts;
  for (size_t i = 0; i < services->size(); ++i) {
    ServiceRoute s;
    const std::string path = fmt::format("services[{}].", i);
    ARBITER_RETURN_IF_ERROR(ParseService((*services)[i], path, &s));
    if (!names.insert(s.name).second) {
      return Bad(path + "name", fmt::format("service \"{}\" appears twice", s.name));
    }
    for (size_t h = 0; h < s.hosts.size(); ++h) {
      if (!hosts.insert(s.hosts[h]).second) {
        return Bad(fmt::format("{}hosts[{}]", path, h),
                   fmt::format("host \"{}\" routes to two services", s.hosts[h]));
      }
    }
    table.services.push_back(std::move(s));
  }
  return table;
}

std::string RouteTableJson(const RouteTable& table) {
  json services = json::array();
  for (const ServiceRoute& s : table.services) {
    json revisions = json::array();
    for (const RevisionRoute& r : s.revisions) {
      json replicas = json::array();
      for (const ReplicaRoute& rep : r.replicas) {
        replicas.push_back({{"id", rep.id}, {"address", rep.address}});
      }
      revisions.push_back(
          {{"revision", r.revision}, {"percent", r.percent}, {"replicas", std::move(replicas)}});
    }
    services.push_back({{"name", s.name},
                        {"tenant", s.tenant},
                        {"hosts", s.hosts},
                        {"max_concurrency", s.max_concurrency},
                        {"queue_max", s.queue_max},
                        {"queue_timeout_ms", s.queue_timeout_ms},
                        {"revisions", std::move(revisions)}});
  }
  return json{{"version", table.version}, {"services", std::move(services)}}.dump();
}

}  // namespace arbiter::gateway
