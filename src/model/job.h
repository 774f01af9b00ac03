// A job as the model describes it: what it asks for and the rules it runs under.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/resources.h"
#include "model/time.h"

namespace arbiter {

enum class JobType { kTraining, kFineTuning, kEvaluation, kBatchInference, kService, kExperiment };

std::string_view JobTypeName(JobType t);  // "training", "fine-tuning", ...
bool ParseJobType(std::string_view s, JobType* out);

struct Toleration {
  std::string key;
  std::string value;  // empty: tolerates any value of the key
  bool operator==(const Toleration&) const = default;
};

struct JobSpec {
  JobId id;
  std::string name;
  std::string tenant;
  std::string queue;
  std::string user;
  JobType type = JobType::kTraining;
  std::string priority_class;
  int32_t tasks = 1;                    // tasks that start together (a gang when > 1)
  TaskResources resources;              // per task
  std::vector<std::string> gpu_models;  // allowed models, in order of preference; empty: any
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  bool distinct_nodes = false;   // every task on its own node
  int64_t walltime_seconds = 0;  // 0: the queue's default, else none
  int32_t max_retries = 0;
  std::optional<bool> preemptible;  // overrides the priority class when set
  TimeMs submit_time = 0;
};

// Checks every field; errors name the field ("resources.gpus", "tasks").
Status ValidateJobSpec(const JobSpec& job);

}  // namespace arbiter
