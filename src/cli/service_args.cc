#include "cli/service_args.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>

#include "api/k8s_manifest.h"
#include "cli/client.h"
#include "cli/output.h"
#include "common/status.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

bool ParseWhole(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

// Whether `line` is a document marker: `---` or `...` alone or followed by a blank.
bool IsMarker(std::string_view line, std::string_view marker) {
  if (line.substr(0, 3) != marker) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r' ||
         line[3] == '\n';
}

bool IsBlank(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t eol = text.find('\n', i);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(i, eol - i);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && line[first] != '#') return false;
    i = eol + 1;
  }
  return true;
}

// Removes the block mapping's top-level `kind: ...` line (at column 0); false when there is none.
bool DropTopLevelKind(std::string* text) {
  size_t i = 0;
  while (i < text->size()) {
    size_t eol = text->find('\n', i);
    const size_t next = eol == std::string::npos ? text->size() : eol + 1;
    std::string_view line(text->data() + i, next - i);
    if (line.substr(0, 4) == "kind") {
      const size_t colon = line.find_first_not_of(" \t", 4);
      if (colon != std::string_view::npos && line[colon] == ':') {
        text->erase(i, next - i);
        return true;
      }
    }
    i = next;
  }
  return false;
}

}  // namespace

Result<json> ParseTrafficArgs(const std::vector<std::string>& args) {
  if (args.empty()) {
    return InvalidArgument("traffic", "give REVISION=PERCENT for each revision, e.g. 3=90 4=10");
  }
  json out = json::array();
  std::set<int64_t> seen;
  int64_t total = 0;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    int64_t rev = 0, pct = 0;
    if (eq == std::string::npos || !ParseWhole(std::string_view(a).substr(0, eq), &rev) ||
        !ParseWhole(std::string_view(a).substr(eq + 1), &pct)) {
      return InvalidArgument("traffic", fmt::format("'{}' is not REVISION=PERCENT (e.g. 3=90)", a));
    }
    if (rev < 1) return InvalidArgument("traffic", fmt::format("'{}': revisions start at 1", a));
    if (pct < 0 || pct > 100) {
      return InvalidArgument("traffic", fmt::format("'{}': a percent is 0 to 100", a));
    }
    if (!seen.insert(rev).second) {
      return InvalidArgument("traffic", fmt::format("revision {} is given twice", rev));
    }
    total += pct;
    out.push_back({{"revision", rev}, {"percent", pct}});
  }
  if (total != 100) {
    return InvalidArgument("traffic", fmt::format("the percents add up to {}, not 100", total));
  }
  return out;
}

std::vector<YamlDocument> SplitYamlDocuments(std::string_view text) {
  std::vector<YamlDocument> docs;
  YamlDocument cur;
  int line_no = 0;
  bool in_doc = true;  // text before any marker is a document too
  auto flush = [&] {
    if (!IsBlank(cur.text)) docs.push_back(cur);
    cur = YamlDocument{};
  };
  size_t i = 0;
  while (i < text.size()) {
    size_t eol = text.find('\n', i);
    const size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view line = text.substr(i, next - i);
    ++line_no;
    if (IsMarker(line, "---")) {
      flush();
      cur.first_line = line_no + 1;
      in_doc = true;
      // Content after the marker on the same line ("--- {a: 1}") belongs to the document.
      std::string_view rest = line.substr(3);
      const size_t first = rest.find_first_not_of(" \t\r\n");
      if (first != std::string_view::npos) {
        cur.first_line = line_no;
        cur.text.append(rest.substr(first));
      }
    } else if (IsMarker(line, "...")) {
      flush();
      cur.first_line = line_no + 1;
      in_doc = false;
    } else {
      if (!in_doc && !IsBlank(line)) {
        // Content after `...` without a new `---` starts a document (as YAML streams allow).
        in_doc = true;
        cur.first_line = line_no;
      }
      cur.text.append(line);
    }
    i = next;
  }
  flush();
  return docs;
}

Result<ApplyDocuments> SplitApplyFile(std::string_view text) {
  ApplyDocuments out;
  for (const YamlDocument& d : SplitYamlDocuments(text)) {
    YAML::Node node;
    try {
      node = YAML::Load(d.text);
    } catch (const YAML::Exception& e) {
      return InvalidArgument(
          "", fmt::format("the document at line {}: {}", d.first_line + e.mark.line, e.msg));
    }
    std::string kind;
    if (node.IsMap() && node["kind"]) {
      const YAML::Node k = node["kind"];
      if (!k.IsScalar()) {
        return InvalidArgument("kind",
                               fmt::format("the document at line {}: kind must be Service or "
                                           "Cluster",
                                           d.first_line));
      }
      kind = k.Scalar();
    }
    if (node.IsMap() && node["apiVersion"]) {
      const YAML::Node av = node["apiVersion"];
      if (av.IsScalar() && av.Scalar() == "v1" && kind == "Service") {
        out.warnings.push_back(
            fmt::format("the v1 Service at line {} is skipped: the gateway "
                        "routes to a service's replicas (docs/services.md)",
                        d.first_line));
        continue;
      }
      auto t = api::TranslateK8sManifest(d.text);
      if (!t.ok()) {
        return Status(
            t.status().code(),
            fmt::format("the document at line {}: {}", d.first_line, Describe(t.status())),
            t.status().field());
      }
      if (!t->ignored.empty()) {
        out.warnings.push_back(fmt::format("line {}: {}", d.first_line, t->Warning()));
      }
      if (t->is_service) {
        out.services.push_back(std::move(t->body));
        out.service_lines.push_back(d.first_line);
      } else {
        out.jobs.push_back(std::move(t->body));
        out.job_lines.push_back(d.first_line);
      }
      continue;
    }
    if (kind == "Service" || kind == "service") {
      json svc = YamlToJson(node);
      svc.erase("kind");
      out.services.push_back(std::move(svc));
      out.service_lines.push_back(d.first_line);
      continue;
    }
    if (!kind.empty() && kind != "Cluster" && kind != "cluster") {
      return InvalidArgument(
          "kind",
          fmt::format("the document at line {}: unknown kind '{}' (Service or Cluster; or a "
                      "Kubernetes Job, PyTorchJob or Deployment with its apiVersion)",
                      d.first_line, kind));
    }
    if (!out.config_yaml.empty()) {
      return InvalidArgument(
          "", fmt::format("the document at line {} is a second cluster configuration (the first "
                          "is at line {}); a file holds at most one",
                          d.first_line, out.config_line));
    }
    std::string text_doc = d.text;
    if (!kind.empty() && !DropTopLevelKind(&text_doc)) {
      // The server's configuration has no `kind`: drop it (a flow-style document is re-emitted).
      YAML::Node copy = YAML::Clone(node);
      copy.remove("kind");
      YAML::Emitter e;
      e << copy;
      text_doc = std::string(e.c_str()) + "\n";
    }
    out.config_yaml = text_doc;
    out.config_line = d.first_line;
  }
  return out;
}

std::string TrafficText(const json& traffic) {
  if (!traffic.is_array() || traffic.empty()) return "-";
  std::string out;
  for (const json& t : traffic) {
    const json& p = t.value("percent", json(0));
    std::string pct = p.is_number_integer() ? std::to_string(p.get<int64_t>())
                      : p.is_number()       ? fmt::format("{:.1f}", p.get<double>())
                                            : "?";
    AppendTo(&out, " ", fmt::format("{}={}", t.value("revision", int64_t{0}), pct));
  }
  return out;
}

std::string ReadyText(const json& service) {
  const json status = service.value("status", json::object());
  const int64_t ready = status.value("ready", int64_t{0});
  const int64_t desired = status.value("desired", service.value("replicas", int64_t{0}));
  return fmt::format("{}/{}", ready, desired);
}

}  // namespace arbiter::cli
