#include "model/node.h"

#include <fmt/format.h>

#include <set>

namespace arbiter {

std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kReady:
      return "ready";
    case NodeState::kCordoned:
      return "cordoned";
    case NodeState::kDraining:
      return "draining";
    case NodeState::kDown:
      return "down";
  }
  return "unknown";
}

bool ParseNodeState(std::string_view s, NodeState* out) {
  for (NodeState v :
       {NodeState::kReady, NodeState::kCordoned, NodeState::kDraining, NodeState::kDown}) {
    if (NodeStateName(v) == s) {
      *out = v;
      return true;
    }
  }
  return false;
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto ok_first = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!ok_first(name[0])) return false;
  for (char c : name) {
    if (!ok_first(c) && c != '-') return false;
  }
  return true;
}

bool IsValidQueueAlias(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsValidHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Status ValidateNode(const Node& n, const std::string& field) {
  const std::string p = field.empty() ? "" : field + ".";
  if (!IsValidHostName(n.name)) {
    return InvalidArgument(p + "name", fmt::format("'{}' is not a valid node name", n.name));
  }
  if (n.cpu_milli < 0) return InvalidArgument(p + "cpu_milli", "must be >= 0");
  if (n.memory_mib < 0) return InvalidArgument(p + "memory_mib", "must be >= 0");
  std::set<int32_t> seen;
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    const std::string gp = fmt::format("{}gpus[{}].", p, i);
    if (g.index < 0) return InvalidArgument(gp + "index", "must be >= 0");
    if (!seen.insert(g.index).second) {
      return InvalidArgument(gp + "index", fmt::format("duplicate GPU index {}", g.index));
    }
    if (g.model.empty()) return InvalidArgument(gp + "model", "must not be empty");
    if (g.memory_mib < 0) return InvalidArgument(gp + "memory_mib", "must be >= 0");
  }
  return Status::Ok();
}

}  // namespace arbiter
