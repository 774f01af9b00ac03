#include "model/mounts.h"

#include <fmt/format.h>

namespace arbiter {

std::string_view MountModeName(bool read_only) { return read_only ? "ro" : "rw"; }

std::string MountPathProblem(std::string_view path) {
  if (path.empty()) return "must not be empty";
  if (path.size() > kMaxMountPathBytes) {
    return fmt::format("must be at most {} bytes", kMaxMountPathBytes);
  }
  if (path[0] != '/') return "must be an absolute path";
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "must not contain control characters";
    }
    // A bind's options follow the paths after ':' and ',' on engines' command lines.
    if (c == ':' || c == ',') return "must not contain ':' or ','";
  }
  if (path == "/") return "";
  if (path.back() == '/') return "must not end with '/'";
  size_t i = 1;
  while (i <= path.size()) {
    const size_t end = std::min(path.find('/', i), path.size());
    const std::string_view part = path.substr(i, end - i);
    if (part.empty()) return "must not contain '//'";
    if (part == "..") return "must not contain '..'";
    if (part == ".") return "must not contain '.' components";
    i = end + 1;
  }
  return "";
}

bool IsValidVolumeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxVolumeNameBytes) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return name.front() != '-' && name.back() != '-';
}

std::string VolumeEnvName(std::string_view name) {
  std::string out = "ARBITER_VOLUME_";
  for (char c : name) {
    out += c == '-' ? '_' : (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  return out;
}

bool PathIsUnder(std::string_view path, std::string_view base) {
  if (base == "/") return !path.empty() && path[0] == '/';
  if (path.substr(0, base.size()) != base) return false;
  return path.size() == base.size() || path[base.size()] == '/';
}

const MountRule* FindMountRule(const Mount& m, const std::vector<MountRule>& rules) {
  const MountRule* best = nullptr;
  for (const MountRule& r : rules) {
    if (!PathIsUnder(m.path, r.path)) continue;
    if (!m.read_only && r.read_only) continue;
    if (best == nullptr || r.path.size() > best->path.size()) best = &r;
  }
  return best;
}

namespace {

std::string RulesText(const std::vector<MountRule>& rules) {
  if (rules.empty()) return "none";
  std::string out;
  for (const MountRule& r : rules) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", r.path, MountModeName(r.read_only));
  }
  return out;
}

std::string VolumesText(const std::vector<VolumeRule>& volumes) {
  if (volumes.empty()) return "none";
  std::string out;
  for (const VolumeRule& v : volumes) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", v.name, MountModeName(v.read_only));
  }
  return out;
}

Status CheckVolumeAllowed(const Mount& m, const std::vector<VolumeRule>& volumes,
                          std::string_view tenant, const std::string& field) {
  for (const VolumeRule& v : volumes) {
    if (v.name != m.volume) continue;
    if (!m.read_only && v.read_only) {
      return InvalidArgument(field + ".mode",
                             fmt::format("volume {} may only be mounted read-only by tenant {} "
                                         "(volumes: {})",
                                         m.volume, tenant, VolumesText(volumes)));
    }
    return Status::Ok();
  }
  return InvalidArgument(field + ".volume", fmt::format("tenant {} has no volume {} (volumes: {})",
                                                        tenant, m.volume, VolumesText(volumes)));
}

}  // namespace

Status CheckMountsAllowed(const std::vector<Mount>& mounts, const std::vector<MountRule>& rules,
                          const std::vector<VolumeRule>& volumes, std::string_view tenant,
                          const std::string& prefix) {
  for (size_t i = 0; i < mounts.size(); ++i) {
    const Mount& m = mounts[i];
    if (!m.volume.empty()) {
      ARBITER_RETURN_IF_ERROR(
          CheckVolumeAllowed(m, volumes, tenant, fmt::format("{}[{}]", prefix, i)));
      continue;
    }
    if (FindMountRule(m, rules) != nullptr) continue;
    bool under_ro = false;
    for (const MountRule& r : rules) under_ro = under_ro || PathIsUnder(m.path, r.path);
    if (under_ro) {
      return InvalidArgument(fmt::format("{}[{}].mode", prefix, i),
                             fmt::format("{} may only be mounted read-only by tenant {} ({})",
                                         m.path, tenant, RulesText(rules)));
    }
    return InvalidArgument(fmt::format("{}[{}].path", prefix, i),
                           fmt::format("{} is not under an allowed path of tenant {} ({})", m.path,
                                       tenant, RulesText(rules)));
  }
  return Status::Ok();
}

std::string ImageRegistry(std::string_view image) {
  const size_t slash = image.find('/');
  if (slash == std::string_view::npos) return "docker.io";
  const std::string_view first = image.substr(0, slash);
  if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
      first == "localhost") {
    return std::string(first);
  }
  return "docker.io";
}

std::string CanonicalImage(std::string_view image) {
  const size_t slash = image.find('/');
  if (slash == std::string_view::npos) return fmt::format("docker.io/library/{}", image);
  const std::string registry = ImageRegistry(image);
  if (registry == "docker.io" && image.substr(0, slash) != "docker.io") {
    return fmt::format("docker.io/{}", image);
  }
  return std::string(image);
}

bool ImageAllowed(std::string_view image, const ImagePolicy& policy) {
  if (!policy.registries) return true;
  const std::string canonical = CanonicalImage(image);
  for (const std::string& p : *policy.registries) {
    if (p.empty()) continue;
    if (canonical.substr(0, p.size()) != p) continue;
    if (p.back() == '/' || canonical.size() == p.size()) return true;
    const char next = canonical[p.size()];
    if (next == '/' || next == ':' || next == '@') return true;
  }
  return false;
}

Status CheckImageAllowed(std::string_view image, const ImagePolicy& policy, std::string_view tenant,
                         const std::string& field) {
  if (ImageAllowed(image, policy)) return Status::Ok();
  const std::vector<std::string>& regs = *policy.registries;
  return InvalidArgument(
      field,
      fmt::format("{} is not from a registry tenant {} may use ({})", image, tenant,
                  regs.empty() ? std::string("none") : fmt::format("{}", fmt::join(regs, ", "))));
}

}  // namespace arbiter
