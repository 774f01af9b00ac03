// libFuzzer target for the API codecs: arbitrary bytes into ParseJobSubmission, ParseJobBatch
// and ParseConfigYaml. Neither may crash, leak, hang or throw; whatever parses must round-trip
// (JobSpecToJson and DumpConfigYaml give back what they were given), and every error must make a
// dumpable error body. Build and run: `make fuzz` (see fuzz/README.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "api/config_codec.h"
#include "api/errors.h"
#include "api/job_codec.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "api_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void CheckError(const arbiter::Status& s) {
  if (s.code() != arbiter::StatusCode::kInvalidArgument) Fail("not invalid_argument", s.ToString());
  (void)arbiter::api::ErrorBody(s).dump();  // must not throw
}

void Job(std::string_view in) {
  arbiter::Result<arbiter::JobSpec> job = arbiter::api::ParseJobSubmission(in);
  if (!job.ok()) return CheckError(job.status());
  const nlohmann::json j = arbiter::api::JobSpecToJson(*job);
  const std::string text = j.dump();
  arbiter::Result<arbiter::JobSpec> again = arbiter::api::ParseJobSubmission(text);
  if (!again.ok())
    Fail("JobSpecToJson output does not parse", again.status().ToString() + "\n" + text);
  if (arbiter::api::JobSpecToJson(*again) != j) Fail("job round trip differs", text);
}

void Batch(std::string_view in) {
  arbiter::Result<std::vector<arbiter::JobSpec>> jobs = arbiter::api::ParseJobBatch(in);
  if (!jobs.ok()) return CheckError(jobs.status());
  if (jobs->empty() || jobs->size() > arbiter::api::kMaxBatchJobs) Fail("batch size", "");
  for (const arbiter::JobSpec& job : *jobs) {
    const std::string text = arbiter::api::JobSpecToJson(job).dump();
    if (!arbiter::api::ParseJobSubmission(text).ok()) Fail("batch job does not parse alone", text);
  }
}

void Config(std::string_view in) {
  arbiter::Result<arbiter::api::ClusterConfig> config = arbiter::api::ParseConfigYaml(in);
  if (!config.ok()) return CheckError(config.status());
  const std::string dumped = arbiter::api::DumpConfigYaml(*config);
  arbiter::Result<arbiter::api::ClusterConfig> again = arbiter::api::ParseConfigYaml(dumped);
  if (!again.ok())
    Fail("DumpConfigYaml output does not parse", again.status().ToString() + "\n" + dumped);
  if (arbiter::api::DumpConfigYaml(*again) != dumped) Fail("config round trip differs", dumped);
  if (!arbiter::api::DiffConfig(*config, *again).empty()) Fail("diff after round trip", dumped);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Job(in);
  Batch(in);
  Config(in);
  return 0;
}
