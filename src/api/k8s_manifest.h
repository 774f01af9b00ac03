// Kubernetes manifests as Arbiter objects (docs/kubernetes.md): a `batch/v1` Job or a Kubeflow
// `kubeflow.org/v1` PyTorchJob becomes the body of POST /api/v1/jobs, an `apps/v1` Deployment the
// service object of POST /api/v1/services (`arbiter submit -f`, `arbiter apply -f`).
//
// What is read (paths of the pod template under the kind's template):
//   metadata.name                       -> name
//   metadata.labels or .annotations ["kueue.x-k8s.io/queue-name"] -> queue
//   containers[0].image                 -> container_image
//   containers[0].command + args        -> command (a command is required: an image's
//                                          ENTRYPOINT is not known when a job is submitted)
//   containers[0].env[].name/value      -> env
//   containers[0].workingDir            -> workdir
//   containers[0].resources.limits, else .requests: nvidia.com/gpu -> resources.gpus,
//                                          cpu -> cpu_milli, memory -> memory_mib
//   containers[0].volumeMounts of hostPath volumes -> mounts (readOnly -> mode ro)
//   containers[0].volumeMounts of persistentVolumeClaim volumes -> mounts of the tenant's
//                                          volume named claimName (its or the mount's readOnly
//                                          -> mode ro)
//   priorityClassName, nodeSelector, tolerations[].key/value, terminationGracePeriodSeconds
//   Job: spec.parallelism -> tasks (a gang), backoffLimit -> retry.max_retries,
//        activeDeadlineSeconds -> walltime_seconds
//   PyTorchJob: Master and Worker replicas -> tasks of one gang (their templates must agree),
//        runPolicy.backoffLimit / activeDeadlineSeconds as a Job's
//   Deployment: spec.replicas -> replicas, the container's first port -> port, readinessProbe
//        and livenessProbe (httpGet) -> readiness and liveness, strategy.rollingUpdate
//        (whole numbers) -> rollout
// Every other field is listed in `ignored` (its path in the manifest), and Warning() names them
// all in one line. Whether the names it produces exist (queue, class, nodes) is the server's to
// check, as for any submission.
//
// Errors are InvalidArgument naming the manifest's field ("spec.template.spec.containers").
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::api {

// The label (or annotation) Kueue reads a workload's queue from.
inline constexpr std::string_view kKueueQueueLabel = "kueue.x-k8s.io/queue-name";

struct K8sTranslation {
  bool is_service = false;           // a Deployment: `body` is a service object
  std::string source;                // "batch/v1 Job pi"
  nlohmann::json body;               // the job submission or the service object
  std::vector<std::string> ignored;  // manifest fields with no meaning here, in document order
  // "" when nothing was ignored, else one line: "Job pi: ignored (no meaning in Arbiter):
  // metadata.namespace, spec.suspend".
  std::string Warning() const;
};

// Whether a parsed document is a Kubernetes object (it has `apiVersion` and `kind`).
bool IsK8sManifest(const nlohmann::json& doc);

// One YAML (or JSON) document holding one manifest.
Result<K8sTranslation> TranslateK8sManifest(std::string_view yaml);

// A Kubernetes quantity ("500m", "2", "1.5", "64Mi", "20G", "129e6") in thousandths ("500m" ->
// 500, "2" -> 2000) or in MiB, rounded up. False when it is not a quantity.
bool ParseK8sMilli(std::string_view text, int64_t* out);
bool ParseK8sMib(std::string_view text, int64_t* out);

}  // namespace arbiter::api
