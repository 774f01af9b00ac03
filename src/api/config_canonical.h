// The canonical form of a configuration as a Value tree: what DumpConfigYaml writes and what
// DiffConfig compares. Fields in a fixed order, defaults left out, amounts as ParseConfigYaml
// reads them (milli as decimals, MiB as integers).
//
// Internal to src/api. Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "api/config.h"
#include "api/value.h"

namespace arbiter::api {

Value SchedulerValue(const SchedulerConfig& s);
Value GpuModelValue(const GpuModel& g);
Value PriorityClassValue(const PriorityClass& p);
// A queue's own settings: no parent, no children.
Value QueueValue(const QueueSpec& q);
// A tenant's own settings (its budget and its QueueSpec's): no queues.
Value TenantValue(const TenantConfig& t);
Value UserValue(const UserConfig& u);
// Needs the GPU models: GPUs whose memory is their model's leave it out.
Value NodeValue(const Node& n, const std::vector<GpuModel>& models);
Value ApprovalValue(const ApprovalRuleConfig& r);
// The identity section (oidc, ldap, mappings), defaults left out.
Value IdentityValue(const IdentityConfig& c);
// The whole configuration, queues nested under their parents.
Value ConfigValue(const ClusterConfig& c);

// YAML text of a Value: block style, with small leaf mappings and lists in flow style
// ({name: a, value: 1}); strings that would read as numbers, booleans or null are quoted.
std::string EmitYaml(const Value& v);

}  // namespace arbiter::api
