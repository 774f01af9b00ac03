// A job template read from the parse tree: what a service's replicas run (api/service_codec.h).
// Internal to src/api.
//
// The template takes the job fields that describe one process and where it may run: command
// (required), env, secret_env, workdir, resources, gpu_models, node_selector, tolerations,
// container_image and grace_period_seconds, with the same names, bounds and messages as a job
// submission (job_codec.h); errors name the field under `path` ("template.resources.gpus").
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "api/job_codec.h"
#include "api/value.h"
#include "common/status.h"
#include "model/job.h"

namespace arbiter::api {

// Reads the template at `path` into `job` (ValidateJobSpec and the reserved-variable check
// included).
Status ParseJobTemplate(const Value& v, const std::string& path, JobSpec* job);

}  // namespace arbiter::api
