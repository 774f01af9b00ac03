// What a task may see of its node and where its image may come from: a job's host-path mounts
// and named volumes, a tenant's rules for them, and a tenant's allowed image registries
// (docs/config.md, "Images and mounts", "Volumes").
//
// The rules are checked when a job or service is submitted, on the paths as written: a path is
// absolute, normalized (no "." or ".." component, no "//", no trailing '/'), and it is allowed
// when it is equal to or under a rule's path, component by component ("/data/imagenet2" is not
// under "/data/imagenet"). Symbolic links are not resolved at submission (the server does not
// see the nodes' file systems): the node binds the path as named, and a tenant's rule should name
// real directories.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace arbiter {

inline constexpr size_t kMaxJobMounts = 64;
inline constexpr size_t kMaxMountPathBytes = 4096;
inline constexpr size_t kMaxTenantVolumes = 64;
inline constexpr size_t kMaxVolumeNameBytes = 63;
inline constexpr int64_t kMaxVolumeSizeGib = int64_t{1} << 20;  // 1 PiB

// One host path, or one of its tenant's named volumes, bound into a job's tasks: exactly one of
// `path` and `volume` is set.
struct Mount {
  std::string path;       // on the node: absolute and normalized
  std::string target;     // in the container; empty: the same as `path`
  bool read_only = true;  // "ro" (the default) or "rw"
  // A named volume of the job's tenant (VolumeRule::name): storage of the tenant's own on the
  // node, kept across its jobs there (docs/containers.md, "Volumes").
  std::string volume = {};
  bool operator==(const Mount&) const = default;
};

// A tenant's named volume: its jobs may mount it by name, read-write only where the rule is.
// `size_gib` is what the tenant is meant to keep in it (0: unsaid); nodes do not enforce it.
struct VolumeRule {
  std::string name;
  bool read_only = false;
  int64_t size_gib = 0;
  bool operator==(const VolumeRule&) const = default;
};

// A tenant's allowed host path: jobs may mount it or anything under it; read-write only where
// the rule is.
struct MountRule {
  std::string path;
  bool read_only = true;
  bool operator==(const MountRule&) const = default;
};

// A tenant's images: which registries (prefixes of the image reference, "registry.example.com/
// vision/") its jobs may use; `insecure` are registries (host[:port]) the nodes reach over plain
// HTTP. `registries` unset: any registry.
struct ImagePolicy {
  std::optional<std::vector<std::string>> registries;
  std::vector<std::string> insecure;
  bool operator==(const ImagePolicy&) const = default;
};

std::string_view MountModeName(bool read_only);  // "ro" | "rw"

// An empty string when `path` is absolute and normalized (above), else what is wrong with it
// ("must be an absolute path", "must not contain '..'", ...).
std::string MountPathProblem(std::string_view path);

// Whether `name` is a volume name: a DNS label, `[a-z0-9]([a-z0-9-]*[a-z0-9])?`, at most 63.
bool IsValidVolumeName(std::string_view name);

// The environment variable that names where a task finds the volume `name`: ARBITER_VOLUME_ and
// the name in upper case, '-' as '_' ("ckpt-a" -> ARBITER_VOLUME_CKPT_A). Volume names hold no
// '_', so two volumes never share a variable.
std::string VolumeEnvName(std::string_view name);

// Whether `path` is `base` or under it, component by component. Both normalized.
bool PathIsUnder(std::string_view path, std::string_view base);

// The rule that allows `m` (the most specific one whose path holds m.path and whose mode allows
// m's), or null. Rules are normalized.
const MountRule* FindMountRule(const Mount& m, const std::vector<MountRule>& rules);

// Checks a job's mounts against its tenant's rules: host paths against `rules`, volumes against
// `volumes`. Errors are InvalidArgument naming the field under `prefix` ("mounts[0].path",
// "mounts[1].volume") and the rule broken: "/etc is not under an allowed path of tenant vision
// (/data/imagenet ro, /checkpoints/vision rw)", "tenant vision has no volume scratch (volumes:
// ckpt rw, datasets ro)".
Status CheckMountsAllowed(const std::vector<Mount>& mounts, const std::vector<MountRule>& rules,
                          const std::vector<VolumeRule>& volumes, std::string_view tenant,
                          const std::string& prefix = "mounts");

// The registry part of an image reference, as a container engine reads it: the first component
// when it holds '.' or ':' or is "localhost", else "docker.io" (and a one-component name is
// under "docker.io/library/"). The reference's canonical form `<registry>/<path>[:tag][@digest]`
// is what registry prefixes are matched against.
std::string ImageRegistry(std::string_view image);
std::string CanonicalImage(std::string_view image);

// Whether `image` may be used under `policy`: its canonical form starts with one of the prefixes
// (a prefix without a trailing '/' matches whole components only: "reg.io/a" allows "reg.io/a/x"
// and "reg.io/a:1", not "reg.io/ab").
bool ImageAllowed(std::string_view image, const ImagePolicy& policy);

// InvalidArgument on `field` naming the tenant and its registries when the image is not allowed.
Status CheckImageAllowed(std::string_view image, const ImagePolicy& policy, std::string_view tenant,
                         const std::string& field = "container_image");

}  // namespace arbiter
