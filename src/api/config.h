// The declarative cluster configuration (PUT /api/v1/config, `arbiter apply -f`) as plain values,
// and the difference between two of them (what `?dry_run=true` shows).
//
// config_codec.h reads and writes it as YAML; docs/config.md describes the format.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/gpu_model.h"
#include "model/mounts.h"
#include "model/node.h"
#include "model/priority.h"
#include "model/queue.h"

namespace arbiter::api {

// A tenant's GPU-hour budget per period and what happens when it is spent.
struct BudgetConfig {
  int64_t gpu_hours = 0;
  std::string period = "month";        // day | week | month
  std::string on_exhausted = "block";  // block | best-effort
  bool operator==(const BudgetConfig&) const = default;
};

// Who a tenant's or a user's tasks run as on the nodes (docs/security.md): a user of the nodes
// by name, or a uid (and gid; default: the uid's own number). Unset: the tenant's own uid, which
// the server gives each tenant from --tenant-uid-base.
struct RunAsConfig {
  std::string user;
  std::optional<int64_t> uid;
  std::optional<int64_t> gid;
  bool operator==(const RunAsConfig&) const = default;
};

struct TenantConfig {
  std::string name;
  std::optional<BudgetConfig> budget;
  std::optional<RunAsConfig> run_as;
  bool allow_root = false;  // its tasks may run as uid 0 (run_as: {uid: 0})
  // The queue a member's submission without one goes to (a leaf queue of this tenant); empty:
  // a queue is required.
  std::string default_queue;
  // Where its jobs' and services' images may come from (registries unset: anywhere) and which
  // host paths they may mount (none: no mounts): model/mounts.h, docs/config.md.
  ImagePolicy images;
  std::vector<MountRule> mounts;
  // Its named volumes: storage of its own on each node, which its jobs mount by name.
  std::vector<VolumeRule> volumes;
  // The tenant itself first (is_tenant = true, no parent), then every queue under it, parents
  // before their children, each naming its parent: the form QuotaTree::Build takes.
  std::vector<QueueSpec> queues;
};

struct UserConfig {
  std::string name;
  std::string tenant;                 // empty only for admins
  std::string role;                   // admin | tenant-admin | member | viewer
  std::optional<RunAsConfig> run_as;  // this user's tasks (overrides the tenant's)
  bool operator==(const UserConfig&) const = default;
};

struct ScoreWeightConfig {
  std::string plugin;
  int64_t weight = 1;
  bool operator==(const ScoreWeightConfig&) const = default;
};

// Which placement profile the scheduler runs. A named policy ("default", "binpack", "spread",
// "topology", "fgd", "bestfit", ...), or a custom profile when `scores` is given; `filters`,
// `gpu_selector` and `nodes_to_score` refine either. The server validates the plugin names when
// it loads the configuration (the plugins live in the core).
struct SchedulerConfig {
  std::string policy;                     // empty: "default"
  std::vector<std::string> filters;       // empty: every built-in filter
  std::vector<ScoreWeightConfig> scores;  // non-empty: a custom profile
  std::string gpu_selector;               // empty: the policy's ("best-fit" or "fgd")
  int64_t nodes_to_score = 0;             // 0: adaptive
  bool operator==(const SchedulerConfig&) const = default;
};

// Which submissions wait for a person's approval before they are scheduled (docs/approvals.md).
// Every condition set must hold; at least one is set. A job's GPUs are its tasks x GPUs per task,
// its GPU-hours those GPUs x its walltime.
struct ApprovalWhen {
  std::optional<int64_t> gpus_at_least;
  std::optional<int64_t> gpu_hours_at_least;
  std::string priority_class;  // empty: any
  std::string queue;           // empty: any
  std::string type;            // a job type's name ("training"); empty: any
  bool operator==(const ApprovalWhen&) const = default;
};

// Who may decide: the tenant admins of the job's tenant (role "tenant-admin"), or the users
// named. Admins may always decide; nobody decides on their own job.
struct ApprovalRuleConfig {
  std::string name;
  ApprovalWhen when;
  std::string approver_role;                // "tenant-admin", or empty when `approver_users`
  std::vector<std::string> approver_users;  // non-empty when no role
  int64_t expires_after_seconds = 0;        // 0: never expires
  bool operator==(const ApprovalRuleConfig&) const = default;
};

// Where people's identities come from (docs/identity.md): an OIDC provider whose signed JWTs the
// API accepts as bearer tokens, and an LDAP directory `arbiter login --ldap` binds to. Which
// tenant and role a person has comes from `mappings`, by group or by user name.
struct OidcConfig {
  std::string issuer;  // https://..., or http:// on a loopback address; no trailing '/'
  std::string audience;
  std::string client_id;  // the console's sign-in and the CLI's device flow
  std::string username_claim = "preferred_username";
  std::string groups_claim = "groups";
  int64_t clock_skew_seconds = 60;  // allowed on exp, nbf and iat
  bool operator==(const OidcConfig&) const = default;
};

struct LdapConfig {
  std::string url;         // ldap://HOST[:PORT] or ldaps://HOST[:PORT]
  std::string user_dn;     // the DN bound as, with {user} for the name: uid={user},ou=people,...
  std::string group_base;  // where groups are searched; empty: no groups
  // The groups of a user: {dn} and {user} are replaced (escaped for a filter).
  std::string group_filter = "(|(member={dn})(uniqueMember={dn})(memberUid={user}))";
  std::string group_attribute = "cn";  // the group's name
  bool start_tls = false;
  int64_t token_ttl_seconds = 43200;  // lifetime of the token a login gets
  bool operator==(const LdapConfig&) const = default;
};

// One rule: who it matches (a group, or a user by name) and what they are.
struct IdentityMapping {
  std::string group;  // exactly one of group and user
  std::string user;
  std::string tenant;  // empty only for role admin
  std::string role;    // admin | tenant-admin | member | viewer
  bool operator==(const IdentityMapping&) const = default;
};

struct IdentityConfig {
  std::optional<OidcConfig> oidc;
  std::optional<LdapConfig> ldap;
  std::vector<IdentityMapping> mappings;  // in order: the first that matches applies
  bool operator==(const IdentityConfig&) const = default;
};

// The first mapping that matches `user` or one of `groups`; null when none does.
const IdentityMapping* MapIdentity(const IdentityConfig& c, const std::string& user,
                                   const std::vector<std::string>& groups);

struct ClusterConfig {
  SchedulerConfig scheduler;
  std::vector<GpuModel> gpu_models;
  std::vector<PriorityClass> priority_classes;
  std::vector<TenantConfig> tenants;
  std::vector<UserConfig> users;
  std::vector<Node> nodes;                    // static nodes; agents register the others
  std::vector<ApprovalRuleConfig> approvals;  // in order: the first rule that matches applies
  IdentityConfig identity;
};

// One difference between two configurations.
struct ConfigChange {
  std::string kind;    // scheduler | gpu_model | priority_class | tenant | queue | user | node |
                       // approval | identity
  std::string name;    // the object's name (queues: their own, unique across tenants)
  std::string action;  // create | update | delete
  // create: the object's settings ("memory_mib: 81920; price_per_hour: 2.5"); update: what
  // changed ("guaranteed.gpu: 8 -> 16; max.gpu: (none) -> 32"); delete: empty.
  std::string detail;
  bool operator==(const ConfigChange&) const = default;
};

// What turns `current` into `desired`: objects are matched by kind and name and compared in their
// canonical form (DumpConfigYaml's), so two configurations that dump alike have no changes. Order:
// by kind as listed above, then by name. A queue moved to another parent is an update of its
// "parent"; a tenant's budget and limits belong to the tenant, its queues are separate objects.
// Requires: both as ParseConfigYaml returns them (see DumpConfigYaml).
std::vector<ConfigChange> DiffConfig(const ClusterConfig& current, const ClusterConfig& desired);

}  // namespace arbiter::api
