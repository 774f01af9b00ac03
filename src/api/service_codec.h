// The service object of the REST API (POST/PUT /api/v1/services, `kind: Service` in
// `arbiter apply -f`): JSON (or YAML) to ServiceSpec and the answers back (docs/services.md).
//
//   {"name": "chat", "queue": "serving", "priority_class": "serving",
//    "template": {"command": ["python3", "server.py"], "resources": {"gpus": 1}},
//    "replicas": 3, "port": 0, "hosts": ["chat.example.com"],
//    "readiness": {"path": "/healthz", "period_seconds": 1, "timeout_seconds": 1,
//                  "failure_threshold": 3, "success_threshold": 1, "initial_delay_seconds": 0},
//    "liveness": {...}, "max_concurrency": 8, "request_queue": {"max": 1000, "timeout_ms": 30000},
//    "rollout": {"max_surge": 1, "max_unavailable": 0},
//    "slo": {"latency_ms": 500, "percentile": 99, "availability": 99.9},
//    "drain_seconds": 30, "traffic": [{"revision": 3, "percent": 90}, ...]}
//
// Required: name, template (and its command). Bounds: name [a-z0-9]([a-z0-9-]*[a-z0-9])? of at
// most 40; replicas 0..1000; port 0..65535 (0: one per replica from the server's range); probe
// path starting with '/', period 0.1..3600 s, timeout 0.1..60 s and at most the period (absent:
// 1 s or the period when shorter),
// thresholds 1..100, initial delay 0..3600 s; max_concurrency 0..100000; request_queue.max
// 0..1000000, timeout_ms 1..600000; rollout max_surge and max_unavailable 0..1000, not both 0;
// drain_seconds 0..3600; traffic: each revision once, percent 0..100, summing to 100. The
// template takes the job fields of api/job_template.h; it may not set PORT (the server does).
// Whether the queue, priority class and traffic's revisions exist is the server's to check.
//
// Every error is InvalidArgument naming the field ("readiness.period_seconds",
// "template.resources.gpus", "traffic"), or none for errors about the whole body.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/service.h"

namespace arbiter::api {

// A request body (JSON).
Result<ServiceSpec> ParseServiceJson(std::string_view json);
// A YAML document (`arbiter apply -f`), without its `kind` (the caller strips it).
Result<ServiceSpec> ParseServiceYaml(std::string_view yaml);

// POST /api/v1/services/{name}/scale: {"replicas": N}, or {"min": A, "max": B} (autoscaling).
Result<ServiceScale> ParseScaleBody(std::string_view json);
// POST /api/v1/services/{name}/traffic: {"traffic": [...]}, checked as a spec's.
Result<std::vector<TrafficSplit>> ParseTrafficBody(std::string_view json);

// The spec as the body that parses back to it (template without secret values; traffic as
// given, which may be empty).
nlohmann::json ServiceSpecToJson(const ServiceSpec& s);
// A template as the API shows it: secret_env as its names only.
nlohmann::json TemplateToJson(const JobSpec& t);
nlohmann::json TrafficToJson(const std::vector<TrafficSplit>& t);

// The service as the API answers it, without "status" (the server adds it): the spec's fields,
// "tenant", "queue" (resolved), "revision", "revisions": [{"revision", "created_ms", "port",
// "template"}], "traffic" (the target), "created_ms", "updated_ms", "user".
nlohmann::json ServiceToJson(const Service& s);

// The stored form (ServiceRecord::spec_json) and its secrets (ServiceRecord::secret_env_json:
// each revision's secret_env values, by revision), and back.
std::string ServiceStoredJson(const Service& s);
std::string ServiceSecretsJson(const Service& s);
Result<Service> ParseStoredService(std::string_view spec_json, std::string_view secrets_json);

}  // namespace arbiter::api
