// Helpers the control plane's files share (control_plane*.cc); not part of its interface.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "model/job.h"
#include "model/node.h"
#include "model/time.h"
#include "server/auth.h"

namespace arbiter::server {

inline constexpr const char* kStepSecretKey = "step_secret";

inline constexpr const char* kConfigKey = "config.yaml";

inline Status Forbidden(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
inline Status NotFoundError(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
// What identifies a submission for Idempotency-Key replays: its canonical spec (the same job
// written with other spacing or key order is the same submission) and its secret values.
std::string RequestDigest(const std::string& spec_json, const JobSpec& spec);
// Viewers and nodes may not submit (403).
Status MaySubmit(const Principal& p);
nlohmann::json NodeToJson(const Node& n);
Result<Node> NodeFromJson(const std::string& text);
// RFC 3339 in UTC with milliseconds; "" for 0.
std::string Iso8601(TimeMs ms);
// Iso8601, or null for 0.
nlohmann::json TimeJson(TimeMs ms);

}  // namespace arbiter::server
