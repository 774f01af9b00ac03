// A node (one GPU server) as the model describes it: capacity, labels, state and its GPUs one by
// one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace arbiter {

enum class NodeState { kReady, kCordoned, kDraining, kDown };

std::string_view NodeStateName(NodeState s);
bool ParseNodeState(std::string_view s, NodeState* out);

struct Gpu {
  int32_t index = 0;  // index on the node, as CUDA_VISIBLE_DEVICES names it
  std::string model;  // GPU model name
  int64_t memory_mib = 0;
  bool healthy = true;
  // GPUs that share an NVLink/NVSwitch island have the same domain; -1 when unknown.
  int32_t nvlink_domain = 0;
};

// A taint keeps jobs off a node unless they tolerate it (e.g. dedicated=inference).
struct Taint {
  std::string key;
  std::string value;
  bool operator==(const Taint&) const = default;
};

// A container image present on a node (its image cache, reported by its agent).
struct NodeImage {
  std::string name;        // as pulled: "registry.example.com/team/trainer:1.4"
  std::string digest;      // "sha256:..." ("" when unknown)
  int64_t size_bytes = 0;  // 0: unknown
  bool operator==(const NodeImage&) const = default;
};

struct Node {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  NodeState state = NodeState::kReady;
  std::vector<Gpu> gpus;
  // Node-level topology: which rack and which network block the node sits in ("" = unknown).
  std::string rack;
  std::string block;
  // The container images the node holds (its heartbeats say; at most kMaxNodeImages).
  std::vector<NodeImage> images = {};
};

inline constexpr size_t kMaxNodeImages = 256;

// Checks names, capacities and GPU indices. `field` prefixes error fields.
Status ValidateNode(const Node& n, const std::string& field);

// Names: [a-z0-9][a-z0-9-]* (nodes also allow '.' and '_' as hostnames do).
bool IsValidName(std::string_view name);
// A queue's alias (a Slurm partition name): letters of either case, digits, '_', '.', '-',
// starting with a letter or digit, at most 63. Every valid name is a valid alias.
bool IsValidQueueAlias(std::string_view name);
// `s` with A-Z lowered (names and aliases compare this way).
std::string LowerAscii(std::string_view s);
bool IsValidHostName(std::string_view name);

}  // namespace arbiter
