// `arbiter array show ID` and `arbiter array throttle ID N`: a job array as one object, and how
// many of its elements may run at once (Slurm's `scontrol update JobId=ID ArrayTaskThrottle=N`).
// Its elements are jobs: `arbiter cancel ID` and the other job commands take the array's id.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/job_refs.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

// The array's id from `text`: the array's own (123); its elements' forms name jobs, not arrays.
Result<uint64_t> ArrayId(const std::string& text) {
  auto ref = ParseJobRef(text);
  if (!ref.ok()) return ref.status();
  if (ref->kind != JobRef::Kind::kJob) {
    return InvalidArgument("", fmt::format("array {}: give the array's id (its first job's), as "
                                           "123",
                                           text));
  }
  return ref->id;
}

void PrintArray(const json& a) {
  const int max_running = a.value("max_running", 0);
  std::printf("Array %llu  %s\n", static_cast<unsigned long long>(a.value("id", uint64_t{0})),
              a.value("name", "").c_str());
  std::printf("  %-12s %s (tenant %s), submitted by %s\n", "Queue:", a.value("queue", "").c_str(),
              a.value("tenant", "").c_str(), a.value("user", "").c_str());
  std::printf("  %-12s %s (%d jobs)\n", "Indices:", a.value("indices", "").c_str(),
              a.value("size", 0));
  std::printf("  %-12s %s\n", "At once:",
              max_running > 0 ? fmt::format("at most {} (%{})", max_running, max_running).c_str()
                              : "no limit");
  std::string text;
  const json states = a.value("states", json::object());
  for (const auto& [state, n] : states.items()) {
    AppendTo(&text, ", ", fmt::format("{} {}", n.get<int64_t>(), state));
  }
  std::printf("  %-12s %s\n", "Jobs:", text.c_str());
}

int Show(const ContextPtr& ctx, const std::string& text) {
  auto id = ArrayId(text);
  if (!id.ok()) return Fail(id.status(), kExitUsage);
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get(fmt::format("/api/v1/arrays/{}", *id));
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
  } else {
    PrintArray(*r);
  }
  return kExitOk;
}

int Throttle(const ContextPtr& ctx, const std::string& text, int32_t max_running) {
  auto id = ArrayId(text);
  if (!id.ok()) return Fail(id.status(), kExitUsage);
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r =
      api.Post(fmt::format("/api/v1/arrays/{}/throttle", *id), json{{"max_running", max_running}});
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
  } else {
    std::printf("array %llu: %s\n", static_cast<unsigned long long>(*id),
                max_running > 0 ? fmt::format("at most {} jobs at once", max_running).c_str()
                                : "no limit on how many run at once");
  }
  return kExitOk;
}

}  // namespace

void RegisterArrayCommands(CLI::App& app, const ContextPtr& ctx) {
  auto* array =
      app.add_subcommand("array", "Job arrays: one, and how many of its jobs run at once");
  array->require_subcommand(1);
  auto id = std::make_shared<std::string>();
  auto* show = array->add_subcommand("show", "Show a job array: indices, limit, jobs per state");
  show->add_option("id", *id, "The array's id (its first job's)")->required();
  AddClientFlags(show, ctx);
  AddOutputFlag(show, ctx, false);
  SetExamples(show, {"arbiter array show 12", "arbiter array show 12 -o json"});
  show->callback([ctx, id] { ctx->Run([&] { return Show(ctx, *id); }); });

  auto limit = std::make_shared<int32_t>(0);
  auto* throttle = array->add_subcommand(
      "throttle", "Change how many of an array's jobs may run at once (Slurm's ArrayTaskThrottle)");
  throttle->add_option("id", *id, "The array's id (its first job's)")->required();
  throttle->add_option("max", *limit, "At most this many at once; 0: no limit")
      ->required()
      ->check(CLI::Range(0, 10000));
  AddClientFlags(throttle, ctx);
  AddOutputFlag(throttle, ctx, false);
  SetExamples(throttle, {"arbiter array throttle 12 4", "arbiter array throttle 12 0"});
  throttle->callback([ctx, id, limit] { ctx->Run([&] { return Throttle(ctx, *id, *limit); }); });
}

}  // namespace arbiter::cli
