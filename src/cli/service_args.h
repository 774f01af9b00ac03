// The pure parts of the service commands: `service traffic NAME 3=90 4=10` arguments, the YAML
// documents of an `apply -f` file (cluster configuration and `kind: Service` documents), and the
// text the tables show for a service.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::cli {

// "3=90" "4=10" -> [{"revision":3,"percent":90},{"revision":4,"percent":10}]. Each argument is
// REVISION=PERCENT (whole numbers; PERCENT 0..100; a revision at most once); the percents must
// add up to 100. Errors name the argument.
Result<nlohmann::json> ParseTrafficArgs(const std::vector<std::string>& args);

// The documents of a YAML stream, split at the document markers (`---` at the start of a line,
// `...` ends one). Empty documents (only blanks and comments) are dropped. Each keeps the line
// (1-based) its text starts on, so that a document can be parsed with its lines where they are.
struct YamlDocument {
  std::string text;
  int first_line = 1;
};
std::vector<YamlDocument> SplitYamlDocuments(std::string_view text);

// An `apply -f` file split by kind: every `kind: Service` document as the JSON object the
// services API takes (without `kind`), and the rest (at most one document: the cluster
// configuration, `kind: Cluster` or no kind) as YAML text. Kubernetes manifests (documents with
// `apiVersion`, api/k8s_manifest.h) are translated: a Deployment joins the services, a Job or a
// PyTorchJob goes to `jobs` (the body of POST /api/v1/jobs); a `v1` Service is skipped (the
// gateway routes to a service's replicas). Each manifest's ignored fields make one warning. A
// `kind` other than these and a second configuration document are errors naming the document's
// line.
struct ApplyDocuments {
  std::string config_yaml;  // "" when the file holds only services and jobs
  int config_line = 0;
  std::vector<nlohmann::json> services;
  std::vector<int> service_lines;
  std::vector<nlohmann::json> jobs;
  std::vector<int> job_lines;
  std::vector<std::string> warnings;
};
Result<ApplyDocuments> SplitApplyFile(std::string_view text);

// "3=90 4=10" (traffic as the server reports it; "-" when empty).
std::string TrafficText(const nlohmann::json& traffic);
// "2/3": ready replicas against desired.
std::string ReadyText(const nlohmann::json& service);

}  // namespace arbiter::cli
