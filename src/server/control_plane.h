// ControlPlane: the server's live state and every operation on it.
//
// Components (each in its own header, saying what it owns and which lock guards it):
//   JobTable      (job_table.h)       jobs, the live and placed indexes, idempotency keys
//   NodeRegistry  (node_registry.h)   nodes, agent sessions, heartbeats, reported capacity
//   TokenRegistry (token_registry.h)  tokens and users' current tenant and role; own lock
//   EventLog      (event_log.h)       the SSE event stream; own lock
//   ServerMetrics (metrics.h)         counters and histograms; prometheus-cpp's own atomics
// and the operations by kind, one file each: control_plane.cc (loading, compiling, events),
// _config.cc (configuration), _jobs.cc (the job lifecycle: submit, transitions, retries),
// _access.cc (authentication and what each role may see), _agents.cc (node registry operations:
// registration, heartbeats, assignments, down detection), _scheduling.cc (the scheduler driver:
// copy inputs, run the core, apply decisions), _metrics.cc, _identity.cc (tenants' uids), and
// sampler.cc (metering).
//
// Locks: one mutex (mu_) guards the configuration, the compiled cluster, JobTable and
// NodeRegistry. They stay under one lock on purpose: a scheduling cycle must copy jobs, nodes and
// quotas as one consistent snapshot, and a node's report changes a job and its node's capacity in
// one step. TokenRegistry and EventLog take their own locks, always after mu_ where both are held
// (they are leaves: they call nothing while holding them), so that authenticating a request and
// following the event stream never wait for a scheduling cycle.
//
// Threads: HTTP handler threads call the public operations; the scheduler thread calls
// RunSchedulingCycle(); the sampler thread calls RecordSamples(). A mutation is applied to memory
// and its WriteBatch enqueued on the store while mu_ is held (so the store's commit order is the
// order of changes), and the caller waits for durability after releasing mu_: a 201 or 200 is
// sent only once the change is committed. A scheduling cycle copies its inputs under mu_, runs the
// pure core without it, and applies the decisions under mu_ again, skipping jobs that changed
// meanwhile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "api/config_codec.h"
#include "api/job_codec.h"
#include "common/result.h"
#include "core/cluster.h"
#include "core/cycle/cycle.h"
#include "core/quota/quota_tree.h"
#include "model/job.h"
#include "model/job_array.h"
#include "model/service.h"
#include "node/execution_backend.h"
#include "server/auth.h"
#include "server/event_log.h"
#include "server/job_arrays.h"
#include "server/job_table.h"
#include "server/lifecycle.h"
#include "server/metrics.h"
#include "server/node_registry.h"
#include "server/oidc.h"
#include "server/quota_requests.h"
#include "server/reports.h"
#include "server/secret_box.h"
#include "server/service_prober.h"
#include "server/service_routes.h"
#include "server/service_table.h"
#include "server/serving_stats.h"
#include "server/start_estimates.h"
#include "server/token_registry.h"
#include "server/webhooks.h"
#include "store/store.h"

namespace arbiter::plan {
struct History;
}  // namespace arbiter::plan

namespace arbiter::server {

// Milliseconds since the epoch; injected so tests can drive time.
using NowFn = std::function<TimeMs()>;

// Where a task's logs are now (JobLogSource): its latest run's node.
struct LogSource {
  std::string node;       // "" : the task has not run yet
  uint64_t attempt = 0;   // the job's latest run (0: none yet)
  bool running = false;   // the task's latest run may still write to its logs
  bool ended = false;     // the job has ended: no run follows (a retry action aside)
  std::string state;      // the job's state ("pending", ...)
  std::string agent_url;  // "" : the node is not run by an agent (the built-in node)
  std::string agent_token;
};

// One run of a task, for its logs (JobLogRuns).
struct LogRun {
  uint64_t attempt = 0;
  std::string node;       // where its logs are ("" : not known)
  std::string after;      // why the run before it ended (server/log_runs.h)
  std::string agent_url;  // the node's agent's log port ("" : none now)
  std::string agent_token;
};

// What GET /api/v1/jobs lists. Each list matches any of its values (empty: no filter); a value
// must be one the caller may see (ListJobs refuses others, naming the field and the known values).
struct JobFilter {
  std::vector<std::string> tenants, queues, states, users, types;
  std::string text;    // lower case: only jobs whose name or command contains it ("" : any)
  uint64_t array = 0;  // only this job array's elements (0: any job)
  std::optional<int64_t> index;  // only its element of this index (with `array`)
  bool active = false;           // only jobs that have not ended
  TimeMs since = 0;              // only jobs that had not ended before it (0: no bound)
  TimeMs until = 0;              // only jobs submitted at or before it (0: no bound)
  uint64_t after_id = 0;         // cursor
  size_t limit = 100;
};

// The kv records of registry credentials: PREFIX + tenant + "/" + registry.
inline constexpr std::string_view kRegistryCredentialKeyPrefix = "registry_credential/";

class ControlPlane : public node::ExecutionBackend {
 public:
  ControlPlane(store::Store* store, NowFn now);

  // Loads everything from the store and compiles the cluster. Call once, before serving.
  Status Load();
  // The first uid given to tenants that name no run_as (each tenant gets its own, once, never
  // reused: docs/security.md). Call before Load.
  void SetTenantUidBase(int64_t base) { tenant_uid_base_ = base; }
  // Who the tasks of tenant `tenant`'s user `user` run as (control_plane_identity.cc).
  RunAs RunAsFor(const std::string& tenant, const std::string& user) const;
  // Creates the first admin token when none exists; returns it (plain) or "" when one exists.
  Result<std::string> BootstrapAdmin();

  // Authenticates a bearer token: an Arbiter token (arb_...), or a JWT of the configured OIDC
  // issuer (oidc.h; verified without taking mu_: a key fetch never holds up the control plane).
  Result<Principal> Authenticate(std::string_view bearer);
  // GET /api/v1/auth/config: how clients sign in (the OIDC issuer, client id and endpoints;
  // whether an LDAP directory is configured). Fetches the issuer's discovery document when it is
  // not cached, without holding mu_.
  nlohmann::json AuthConfig();
  // The identity provider's origins the console may call (OidcVerifier::ConsoleOrigins).
  std::vector<std::string> ConsoleOrigins() const { return oidc_.ConsoleOrigins(); }

  // A live job (not finished, or still stopping) that a configuration would leave without its
  // tenant, queue, priority class or configured node.
  struct AffectedJob {
    uint64_t id = 0;
    std::string tenant, queue, user, state;
    std::string because;  // "queue 'q' is deleted", ...
  };
  struct ConfigApplied {
    std::vector<api::ConfigChange> changes;
    std::vector<AffectedJob> affected;  // the first kMaxAffectedListed of them
    size_t affected_total = 0;
    size_t cancelled = 0;  // pruned: the affected jobs cancelled
    static constexpr size_t kMaxAffectedListed = 20;
  };
  // Configuration (admin): the diff; applied unless dry_run. A configuration that deletes a
  // tenant, queue, priority class or configured node that live jobs use is refused (409, field
  // "prune") unless `prune`, which cancels those jobs; a dry run lists them either way.
  // `expected`: when given, the change is made only if the configuration is still this one
  // (409 otherwise: it changed meanwhile).
  Result<ConfigApplied> ApplyConfig(const Principal& p, const api::ClusterConfig& c, bool dry_run,
                                    bool prune = false,
                                    const api::ClusterConfig* expected = nullptr);
  std::string ConfigYaml() const;
  // Whether any configuration was ever applied (GPU models, priority classes, tenants, users or
  // nodes); false on an empty data dir.
  bool HasConfiguration() const;
  // The first configured GPU model's name, or "".
  std::string FirstGpuModel() const;

  // Jobs. A submission answers the job as the API returns it, as JSON text (the hot path builds
  // no JSON tree of the spec: JobEntry::spec_json).
  struct Submitted {
    uint64_t id = 0;
    std::string body;  // the job object
  };
  Result<Submitted> SubmitJob(const Principal& p, JobSpec spec, const std::string& idem_key,
                              bool* created);
  // Several jobs in one durable batch, all or nothing: {"items": [job, ...]} in order. With an
  // idempotency key, job i has the key KEY#i, so a repeated batch creates nothing again.
  Result<std::string> SubmitJobs(const Principal& p, std::vector<JobSpec> specs,
                                 const std::string& idem_key, bool* created);
  // A job array (Slurm's; control_plane_arrays.cc): one job per index of `array`, recorded in one
  // durable batch, all or nothing, with consecutive ids in the order of the indices; the array's
  // id is its first element's. The answer is that first element. An idempotency key stands for
  // the whole array: a repeated submission answers the same array and makes nothing.
  Result<Submitted> SubmitArray(const Principal& p, JobSpec spec, const api::ArrayRequest& array,
                                const std::string& idem_key, bool* created);
  // The array `id` (its first element's job id), for whoever may read its jobs (another tenant's
  // looks missing: 404): id, name, tenant, user, queue, indices, size, max_running, and how many
  // elements are in each state.
  Result<nlohmann::json> GetArray(const Principal& p, uint64_t id);
  // cancel, suspend, resume or retry every element of the array that the action applies to (the
  // others are left as they are), in one durable batch; the array, with "changed": the ids acted
  // on. 409 when it applies to none. Who may: as for the jobs' actions.
  Result<nlohmann::json> ArrayAction(const Principal& p, uint64_t id, std::string_view action);
  // Scontrol's ArrayTaskThrottle: at most `max_running` of the array's elements hold resources at
  // once from the next cycle on (0: no limit); elements already running are not stopped. Durable
  // (every element's spec says it); answers the array. Who may: as for the jobs' actions.
  Result<nlohmann::json> SetArrayThrottle(const Principal& p, uint64_t id, int32_t max_running);
  Result<nlohmann::json> GetJob(const Principal& p, uint64_t id);
  // {"items": [job, ...], "next_cursor": "ID" or null}, as text. A filter value the caller cannot
  // see is refused (InvalidArgument naming the field and listing the values it may use); queues
  // may be named by alias or in other case, as at submission.
  Result<std::string> ListJobs(const Principal& p, JobFilter f);
  Result<nlohmann::json> JobAction(const Principal& p, uint64_t id, std::string_view action);
  Result<nlohmann::json> JobEvents(const Principal& p, uint64_t id);
  // Why a job waits: its verdict and, for a pending job the last cycle considered, its expected
  // start (start_estimates.h: computed without mu_, or taken from a cache of a few seconds).
  Result<nlohmann::json> WhyPending(const Principal& p, uint64_t id);

  // Tenants, queues, users, tokens, priority classes, nodes.
  Result<nlohmann::json> ListTenants(const Principal& p);
  Result<nlohmann::json> ListQueues(const Principal& p);
  Result<nlohmann::json> GetQueue(const Principal& p, const std::string& name);
  Result<nlohmann::json> ListUsers(const Principal& p);
  Result<nlohmann::json> CreateUser(const Principal& p, const api::UserConfig& u);
  // A token for `r.user`. Node tokens (role node, admins only) name the one node they may
  // register, heartbeat and report for (`r.node`); no other token names a node.
  struct TokenRequest {
    std::string user;
    std::optional<Role> role;
    std::string node;
    DurationMs expires_in_ms = 0;  // 0: never expires
    bool read_only = false;        // scope "read-only": GET and HEAD only (not for node tokens)
  };
  Result<nlohmann::json> CreateToken(const Principal& p, const TokenRequest& r);
  // The tokens the caller may see (its own; a tenant admin: its tenant's; an admin: all), without
  // their hashes.
  Result<nlohmann::json> ListTokens(const Principal& p);
  // Revokes a token the caller may see (not another's, for a member or viewer); it fails at once.
  Result<nlohmann::json> RevokeToken(const Principal& p, const std::string& id);
  Result<nlohmann::json> ListPriorityClasses(const Principal& p);
  Result<nlohmann::json> ListNodes(const Principal& p);
  Result<nlohmann::json> GetNode(const Principal& p, const std::string& name);
  // cordon, drain or uncordon (admins); `reason`: why, shown with the node until it is ready.
  Result<nlohmann::json> NodeAction(const Principal& p, const std::string& name,
                                    std::string_view action, const std::string& reason = "");

  // Execution (the built-in node, and node agents through the calls below).
  // The built-in node's name (--local-node): no agent may register it. Call before serving.
  void SetBuiltinNode(const std::string& name);
  // Registers (or refreshes) the built-in node; fails on invalid specs. `address`: what tasks of
  // gangs led from it use as MASTER_ADDR.
  Status RegisterNode(const Node& node, const std::string& address = "");
  // One field of a node's status ("cgroups", "confinement": how its tasks are confined).
  void SetNodeStatus(const std::string& node, const std::string& key, const std::string& value);
  // The node timeout agents are held to (DetectDownNodes'); they learn it when they register.
  void SetNodeTimeout(DurationMs ms);
  // What every task counts at least, whatever its job asks: CPU and memory below these are
  // raised to them at submission, so that tasks asking for none still count against quotas and
  // node capacity. And the ceiling on each tenant's live tasks where its configuration sets
  // none (`max: {tasks: N}`; 0: none). Call before serving.
  struct TaskLimits {
    int64_t min_cpu_milli = 100;
    int64_t min_memory_mib = 128;
    int64_t tenant_max_tasks = 10000;
  };
  void SetTaskLimits(const TaskLimits& limits);
  // Which finished jobs memory holds (docs/architecture.md, "What memory holds"): at most
  // `finished_max` (the latest finished), none finished more than `finished_max_age_ms` ago.
  // Others are read from the store when asked for, with the same answers. Call before Load.
  struct JobWindow {
    int64_t finished_max = 10000;
    int64_t finished_max_age_ms = 24 * 3600 * 1000;
  };
  void SetJobWindow(const JobWindow& w) { window_ = w; }
  // Drops from memory the finished jobs beyond the window (control_plane_history.cc). Called by
  // the scheduler thread between cycles, never during one: a cycle keeps pointers to entries.
  // Waits for the store to commit what was enqueued (a barrier) before it drops anything, so a
  // job read back from the store is the job memory had. Returns how many left memory.
  size_t EvictFinishedJobs();
  // Jobs held in memory now (the metric arbiter_jobs_in_memory).
  size_t JobsInMemory() const;
  // The built-in node's GPU telemetry, as a heartbeat brings an agent's (its status: what found
  // the GPUs, and per GPU utilisation and memory in use).
  void SetNodeTelemetry(const std::string& node, const std::string& discovery,
                        const std::vector<GpuTelemetry>& gpus);
  // Whether the configuration has this GPU model.
  bool HasGpuModel(const std::string& name) const;
  // node::ExecutionBackend: reports about another attempt than the job's current one, and reports
  // already applied, change nothing.
  std::vector<TaskAssignment> AssignmentsFor(const std::string& node) override;
  void ReportTaskStarted(uint64_t job, int32_t task, uint64_t attempt) override;
  void ReportTaskExited(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                        bool timed_out) override;
  void ReportTaskLost(uint64_t job, int32_t task, uint64_t attempt) override;
  void ReportTaskCheckpointed(uint64_t job, int32_t task, uint64_t attempt) override;
  void ReportTaskFailed(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                        const std::string& reason) override;
  void ReportTaskNote(uint64_t job, int32_t task, uint64_t attempt, const std::string& message,
                      const std::string& image_digest) override;
  void ReportImages(const std::string& node, const std::vector<NodeImage>& images) override;
  // The images the last cycle's reservations need on `node` and it lacks (pre-pulls).
  std::vector<ImagePull> ImagesToPull(const std::string& node) override;

  // Node agents (control_plane_agents.cc); `p` must hold a node token naming the node (403
  // otherwise; the built-in node is never an agent's). Registration validates and records the
  // node (GPU model "" : the first configured model) and opens its session; `remote_addr` is
  // the address the request came from, and the only host the server proxies log requests to.
  Result<nlohmann::json> RegisterAgent(const Principal& p, AgentRegistration r,
                                       const std::string& remote_addr);
  // Applies telemetry and reports (those with seq at most the last applied one are skipped) and
  // answers the node's assignments. FailedPrecondition when the node has no session (the server
  // restarted, or another agent process registered it since): the agent registers again.
  Result<nlohmann::json> Heartbeat(const Principal& p, const AgentHeartbeat& hb);
  // Node agents: waits up to `wait_ms` until the assignments of `node` may have changed from
  // version `known` (as answered by an earlier watch or heartbeat), so that an agent learns of new
  // work at once instead of at its next heartbeat. Returns the current version (the same one
  // after a timeout or at shutdown).
  Result<uint64_t> WatchAssignments(const Principal& p, const std::string& node, uint64_t known,
                                    DurationMs wait_ms);
  // Called (under the control plane's lock: it must only signal) whenever a cycle may admit more
  // than the last one: capacity released, a job pending, a node changed.
  void SetSchedulerWake(std::function<void()> wake);
  // Down detection: nodes registered by agents whose last heartbeat is older than `timeout`
  // become down (a node event) and their tasks are reported lost. Configured nodes no agent
  // registered for, and `builtin` (the --local-node), are exempt. Nodes known from before this
  // server started (none of their agents registered since) are not declared down before
  // `reconnect_window` has passed since the first call: their agents reconnect after a restart.
  // Returns the nodes marked down.
  std::vector<std::string> DetectDownNodes(DurationMs timeout, const std::string& builtin,
                                           DurationMs reconnect_window = 0);
  // Whether node token `p` speaks for node `node` (PermissionDenied naming both otherwise).
  Status CheckNodeToken(const Principal& p, const std::string& node) const;
  // Where the logs of task `task` of job `id` are now, and whether it runs: access as for
  // reading the job. Cheap (memory only): a log follower asks it while it waits.
  Result<LogSource> JobLogSource(const Principal& p, uint64_t id, int32_t task);
  // Every run of task `task` of job `id` so far, oldest first, from the job's history (the
  // store): its node and why the run before it ended. Access as for reading the job.
  Result<std::vector<LogRun>> JobLogRuns(const Principal& p, uint64_t id, int32_t task);

  // Services (control_plane_services.cc, docs/services.md). Tenant-scoped like jobs: admins
  // manage every service, tenant admins and members their tenant's, viewers read them; another
  // tenant's service answers 404 as a missing one. Changes are durable before they answer.
  // Create: 201; a name in use (service names are cluster-unique: the gateway routes /s/NAME/)
  // 409 already_exists. Bad input 400 naming the field ("queue" whose allowed_types exclude
  // service, "traffic" naming a revision that does not exist, "template.gpu_models[0]").
  Result<nlohmann::json> CreateService(const Principal& p, ServiceSpec spec);
  // PUT: replaces the object (a change of template or port makes a new revision).
  Result<nlohmann::json> ReplaceService(const Principal& p, const std::string& name,
                                        ServiceSpec spec);
  Result<nlohmann::json> GetService(const Principal& p, const std::string& name);
  // {"items": [...]}: the services `p` may read, only `tenant`'s when it is not empty.
  Result<nlohmann::json> ListServices(const Principal& p, const std::string& tenant);
  // Removes the service and stops its replicas.
  Result<nlohmann::json> DeleteService(const Principal& p, const std::string& name);
  // A fixed count (400 "replicas" for a service that autoscales), or an autoscaling service's
  // range (400 "min" for one that does not).
  Result<nlohmann::json> ScaleService(const Principal& p, const std::string& name,
                                      const ServiceScale& scale);
  Result<nlohmann::json> SetServiceTraffic(const Principal& p, const std::string& name,
                                           std::vector<TrafficSplit> traffic);
  // Traffic becomes [{P, 100}], P the highest revision below the one with the most traffic now
  // (400 field "revision" when there is none).
  Result<nlohmann::json> RollbackService(const Principal& p, const std::string& name);
  // The ports replicas without a fixed port get, [lo, hi] (--service-ports). Call before serving.
  void SetServicePorts(int32_t lo, int32_t hi);
  // One reconcile of every service (the service controller's thread, about every 100 ms):
  // replicas observed (jobs and `probes`), started, drained and stopped, the routes published;
  // `targets` gets the replicas to probe. Durable before it returns.
  Status ReconcileServices(const std::map<uint64_t, ProbeStatus>& probes,
                           std::vector<ProbeTarget>* targets);
  // Adds a sample of each service revision's ready replicas to its serving minute.
  Status SampleServing();
  // GET /api/v1/gateway/routes: admins and node tokens (and InProcessGatewayToken). Waits up to
  // `wait_ms` while the version is `known`.
  Result<std::string> GatewayRoutes(const Principal& p, uint64_t known, DurationMs wait_ms);
  // POST /api/v1/gateway/stats: added to the minutes of the report's window start.
  Result<nlohmann::json> RecordGatewayStats(const Principal& p, const GatewayStats& stats);
  // A gateway's load report: kept per service and gateway for the autoscaler (in memory).
  Result<nlohmann::json> RecordGatewayLoad(const Principal& p, const GatewayLoad& load);
  // A bearer token that exists only in this process, of role node, for a gateway run inside the
  // server: it reads the routes and sends stats, nothing else a node token could not.
  const std::string& InProcessGatewayToken() const { return gateway_token_; }

  // Directory sign-in (control_plane_directory.cc, docs/identity.md "LDAP"). The directory's
  // settings now (identity.ldap), or nullopt when none are configured: the caller binds to the
  // directory with them without holding any of the control plane's locks.
  std::optional<api::LdapConfig> LdapSettings() const;
  // A token for `user`, whom the directory has just authenticated as a member of `groups`: the
  // first identity mapping that matches (api::MapIdentity, with the mappings as they are now)
  // gives its tenant and role; it is of kind `kind` and expires after `ttl_seconds`. Audited as
  // action `audit_action`. PermissionDenied when no mapping matches (audited too). Answers
  // {token, id, user, tenant, role, expires_at}.
  Result<nlohmann::json> IssueDirectoryToken(const std::string& user,
                                             const std::vector<std::string>& groups,
                                             const std::string& kind, int64_t ttl_seconds,
                                             const std::string& audit_action);

  // Records a mutating call in the audit log (also for denied ones).
  void Audit(const Principal& p, std::string action, std::string target, std::string result);
  // The audit log (admins): at most `limit` records with seq > `after`, oldest first, and
  // next_after (the last seq, or null when there are no more). Every call answered before this one
  // is in it: audit records are written without waiting, so this waits for them first.
  Result<nlohmann::json> ListAudit(const Principal& p, uint64_t after, size_t limit);
  // The audit log searched (GET /api/v1/audit, docs/governance.md): admins search every record,
  // tenant admins their tenant's records only (q.tenant is set to theirs); others are refused.
  Result<nlohmann::json> ListAudit(const Principal& p, store::AuditQuery q);
  // An audit record of `p`'s call, now: its actor, token and source address; `tenant`: the tenant
  // of the object acted on ("" for cluster-wide objects).
  TimeMs now() const { return now_(); }
  store::AuditRecord AuditRecordOf(const Principal& p, std::string action, std::string target,
                                   std::string tenant, std::string detail_json = "{}",
                                   std::string result = "ok") const;

  // Approvals (docs/approvals.md). Approve (to pending) or reject (to rejected, final) a job
  // awaiting approval, with an optional comment (at most 1000 bytes, field "comment"); audited.
  // 404 for a job the caller may neither read nor decide on, 409 when it is not awaiting approval
  // or its request has expired (it is then rejected, saying so), 403 for its own submitter and for
  // callers the rule does not name (admins may decide on any job but their own).
  Result<nlohmann::json> DecideApproval(const Principal& p, uint64_t id, bool approve,
                                        const std::string& comment);
  // {"items": [...]}: the jobs (by id) and then the services (by name) awaiting approval that `p`
  // may decide; each item's `kind` says which (job | service) and `id` names it.
  Result<nlohmann::json> ListApprovals(const Principal& p);
  // Approves (its replicas may start) or rejects (it starts nothing) a service awaiting approval:
  // the same rules and answers as DecideApproval, its creator in place of the submitter.
  Result<nlohmann::json> DecideServiceApproval(const Principal& p, const std::string& name,
                                               bool approve, const std::string& comment);

  // Quota requests (control_plane_quota_requests.cc, docs/approvals.md): a temporary change of a
  // queue's guaranteed amounts, asked for by a member or tenant admin of its tenant and decided by
  // an admin (never the requester); approved, it is applied as a configuration change and undone
  // at its `until`.
  Result<nlohmann::json> CreateQuotaRequest(const Principal& p, QuotaRequestInput in);
  // {"items": [...]}: the caller's tenant's requests (admins: all), newest first.
  Result<nlohmann::json> ListQuotaRequests(const Principal& p);
  Result<nlohmann::json> GetQuotaRequest(const Principal& p, uint64_t id);
  Result<nlohmann::json> DecideQuotaRequest(const Principal& p, uint64_t id, bool approve,
                                            const std::string& comment);
  // Undoes the approved requests whose `until` has passed and expires the undecided ones (called
  // by the scheduling cycle); how many it changed.
  Result<size_t> ExpireQuotaRequests();

  // Registry credentials (control_plane_registry.cc, docs/config.md): per tenant, a registry
  // prefix and the user and password its nodes pull with. The password is sealed with the
  // server's key (secret_box.h) before it is stored and never returned. Tenant admins manage
  // their tenant's, admins any tenant's; every member of a tenant may list them (without
  // passwords). Each change is audited (registry_credential.set, registry_credential.delete).
  // Requires SetSecretBox before Load for set and for ImagePullAuth; without one, setting is
  // refused (FailedPrecondition).
  void SetSecretBox(std::unique_ptr<SecretBox> box);
  Result<nlohmann::json> SetRegistryCredential(const Principal& p, const std::string& tenant,
                                               const std::string& registry, const std::string& user,
                                               const std::string& password);
  // {"items": [{"tenant", "registry", "user", "created_ms", "created_by"}]}: the caller's
  // tenant's (admins: `tenant`'s, or every tenant's when empty), by tenant and registry.
  Result<nlohmann::json> ListRegistryCredentials(const Principal& p, const std::string& tenant);
  Result<nlohmann::json> DeleteRegistryCredential(const Principal& p, const std::string& tenant,
                                                  const std::string& registry);
  // "user:password" of the tenant's credential whose registry prefix matches `image` (the
  // longest; model/mounts.h's matching), decrypted; nullopt when none matches or it does not open
  // (the server's log says so). For what the server sends a node with a task of that image.
  std::optional<std::string> ImagePullAuth(const std::string& tenant,
                                           const std::string& image) const;

  // One scheduling cycle: inputs copied under the lock, the core run without it, decisions applied
  // and persisted. Returns the number of admissions.
  Result<size_t> RunSchedulingCycle();

  // Events after `seq`, waiting up to `wait_ms` when there are none (for the SSE stream).
  std::vector<ServerEvent> EventsAfter(uint64_t seq, int64_t wait_ms);
  uint64_t last_event_seq() const;
  // Wakes anything waiting in EventsAfter (at shutdown).
  void WakeAll();

  // Metering (sampler.cc, docs/reports.md). Records the cluster sample and the GPUs' telemetry
  // samples that stand for [now, now + interval).
  Status RecordSamples(DurationMs interval);
  // Report `name` over `q`, from the stored records and the intervals still open. Admins see
  // every tenant; anyone else only their own tenant's records, and not the cluster-wide reports.
  Result<reports::Table> Report(const Principal& p, std::string_view name, reports::Query q);
  // What-if on recorded history (plan/whatif.h; admins): fills `out` with the jobs of
  // [since_ms, until_ms), the cluster and its configuration. What memory holds is copied under the
  // lock; the other jobs and each admission's wait are read from the store without it; the
  // caller replays off the lock (control_plane_plan.cc).
  Status PlanHistory(const Principal& p, int64_t since_ms, int64_t until_ms, plan::History* out);
  // The control plane's clock.
  TimeMs Now() const { return now_(); }

  // Whether the store is open and the state loaded.
  bool ready() const;

  // Metrics (control_plane_metrics.cc): the counters and histograms the operations update, and
  // GET /metrics' text: those, the live state's gauges gathered under mu_, and the store's stats.
  ServerMetrics& metrics() { return metrics_; }
  // Webhooks (webhooks.h): the API's hooks and their deliveries; job and budget events are
  // raised from here. Its worker is started by the server (Start) and stopped with it.
  Webhooks& webhooks() { return *webhooks_; }
  MetricsSnapshot GatherMetrics();
  std::string MetricsText();

  struct Stats {
    uint64_t cycles = 0;
    uint64_t admissions = 0;
    double last_cycle_seconds = 0;
  };
  Stats stats() const;

 private:
  // What an expected start of pending job `id` needs from the last cycle's input (the owners of
  // its jobs); false when there is no snapshot or the job was not in its queue. Requires mu_.
  bool PrepareEstimateLocked(uint64_t id, EstimateRequest* r) const;
  // ImagePullAuth with mu_ held.
  std::optional<std::string> ImagePullAuthLocked(const std::string& tenant,
                                                 const std::string& image) const;
  // Whether the tenant's images.insecure names the image's registry (pulled over plain HTTP).
  bool ImageInsecureLocked(const std::string& tenant, const std::string& image) const;
  struct Compiled;
  static nlohmann::json NodeJson(const Node& n);  // the stored and listed form
  // Each of these requires mu_.
  Status CompileLocked();
  // `previous`: the configuration being replaced, to delete what is gone (may be null).
  Status PersistConfigLocked(store::WriteBatch* b, const api::ClusterConfig* previous) const;
  // `detail_json`: the event's detail (an admission's: server/log_runs.h).
  // The log port of `node`'s agent, when it has one (`*url`, `*token` unchanged otherwise).
  void LogPortLocked(const std::string& node, std::string* url, std::string* token) const;
  // The first approval rule that matches a new submission, or null.
  const api::ApprovalRuleConfig* ApprovalRuleForLocked(const JobSpec& s) const;
  // The rule a job awaiting approval waits for, while the configuration still has it.
  const api::ApprovalRuleConfig* PendingApprovalRuleLocked(const JobEntry& j) const;
  // Puts a new job in awaiting_approval under `r`; its reason, which names the rule and who may
  // approve.
  std::string AwaitApprovalLocked(JobEntry& j, const api::ApprovalRuleConfig& r);
  // Whether `p` may approve or reject `j` (never its own submitter).
  bool MayDecideLocked(const Principal& p, const JobEntry& j) const;
  // Rejects `j` when its approval request has expired by the clock; true when it did.
  bool ExpireApprovalLocked(JobEntry& j, store::WriteBatch* b);
  void ExpireApprovalsLocked(store::WriteBatch* b);
  // Services (control_plane_approvals.cc): the first rule that matches a new service (max
  // replicas x GPUs per replica, no walltime), or null; whether `p` may decide on it; and, for
  // the service controller, whether its replicas are held (awaiting approval, its request expiring
  // by the clock, or rejected).
  const api::ApprovalRuleConfig* ServiceApprovalRuleLocked(const ServiceSpec& s) const;
  bool MayDecideServiceLocked(const Principal& p, const ServiceEntry& e) const;
  bool ServiceHeldLocked(ServiceEntry& e, TimeMs now, store::WriteBatch* b);
  // Puts a new service in awaiting approval under `r` (its approval's reason names the rule and
  // who may approve).
  void AwaitServiceApprovalLocked(Service& s, const api::ApprovalRuleConfig& r);
  // Whether `p` may decide on a request of `owner` in `tenant` under the rule named `rule`.
  bool MayDecideForLocked(const Principal& p, const std::string& owner, const std::string& tenant,
                          const std::string& rule) const;
  // Quota requests (control_plane_quota_requests.cc).
  void LoadQuotaRequestLocked(const std::string& key, const std::string& value);
  // Registry credentials (control_plane_registry.cc).
  void LoadRegistryCredentialLocked(const std::string& key, const std::string& value);
  nlohmann::json QuotaRequestJsonLocked(const QuotaRequest& r, const Principal& p) const;
  void RecordTransitionLocked(JobEntry& j, JobState to, std::string reason, store::WriteBatch* b,
                              std::string detail_json = "{}");
  // Counts a transition in metrics_; `since`: when the job entered `from`.
  void CountTransitionLocked(const JobEntry& j, JobState from, JobState to, TimeMs since);
  store::JobRecord JobRecordLocked(const JobEntry& j) const;
  // What the reports attribute the job's records to (tenant, queue, user, type, model, GPUs).
  reports::JobInfo ReportJobInfoLocked(const JobEntry& j) const;
  // Appends to `b` the report facts (store::JobFactRecord) that event `e` of `j` makes, and
  // updates j.pending_since / j.running_since; before `j` is put in `b`, so that they are stored.
  void AppendJobFactsLocked(JobEntry& j, const store::JobEventRecord& e, store::WriteBatch* b);
  nlohmann::json JobJsonLocked(const JobEntry& j, const Principal& p) const;
  // The job as the API returns it to `p`: the spec's text with id, tenant, user, state, times,
  // placement and verdict written in (JobJsonLocked parses it, for callers that want a tree).
  // `env` values only where MaySeeEnvValuesLocked, else null; `secret_env` as its names.
  std::string JobTextLocked(const JobEntry& j, const Principal& p) const;
  // ---- Job history (control_plane_history.cc) ----
  // A stored job as memory holds it (Load's reading of a record).
  Result<JobEntry> JobEntryFromRecord(const store::JobRecord& r) const;
  // Puts a job read from the store into the table and its indexes (not the arrays' bounds).
  JobEntry& InsertJobLocked(uint64_t id, JobEntry j);
  // The job of that id: in memory, or read back from the store when it left memory (then held
  // again until the next eviction; an array's element brings its whole array). Null when there
  // is none. Reads the store under mu_ (one row by key, or one array's rows).
  JobEntry* FindJobLocked(uint64_t id);
  // Reads from the store the elements of array `array` (of `size` elements) memory lacks, and
  // sets the array's bounds: an array is held whole or not at all.
  void CompleteArrayLocked(uint64_t array, int32_t size);
  // A report's facts of the jobs its events and usage name that memory no longer holds, read
  // from the store (without mu_).
  Status AddStoredJobInfos(reports::Inputs* in) const;
  // The job of (tenant, user, idempotency key): in memory, or read back from the store. 0: none.
  uint64_t JobByKeyLocked(const std::string& tenant, const std::string& user,
                          const std::string& key);
  // The store's part of a job list (ListJobs): the finished jobs of the filter's tenants, queues,
  // users, states and types that `p` may read, after the cursor; nullopt when none can be in the
  // store only (nothing left memory, or the filter wants live jobs only).
  std::optional<store::JobQuery> HistoryQueryLocked(const Principal& p, const JobFilter& f) const;
  // The job's owner, its tenant's admins and admins see its env values; other members and
  // viewers see the names (docs/security.md, "Who sees a job's environment").
  bool MaySeeEnvValuesLocked(const Principal& p, const JobEntry& j) const;
  nlohmann::json QueueJsonLocked(size_t tree_index) const;
  // What the jobs placed on a node hold there, over every tenant (amounts, never the jobs).
  struct NodeAllocation {
    int64_t gpu_milli = 0;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    int64_t jobs = 0;
  };
  std::map<std::string, NodeAllocation> NodeAllocationsLocked() const;
  // A node as GET /api/v1/nodes lists it: its spec, source, heartbeat, status, what is allocated
  // on it and, when it is not ready, why.
  nlohmann::json NodeListJsonLocked(const NodeEntry& e,
                                    const std::map<std::string, NodeAllocation>& used) const;
  void PushEventLocked(std::string kind, const nlohmann::json& data);
  // A job's transition, written as text (one per submission and state change).
  void PushJobEventLocked(const JobEntry& j, std::string_view from, std::string_view to,
                          std::string_view reason);
  // The nodes `j` is placed on have new assignments: their watches return.
  void TouchNodesLocked(const JobEntry& j);
  bool CanReadTenantLocked(const Principal& p, const std::string& tenant) const;
  // Checks a job listing's filter values against what `p` may see (configured, or on a job `p`
  // may see) and writes queues by their names (aliases and case resolved).
  Status ResolveJobFilterLocked(const Principal& p, JobFilter* f);
  // A submission against the configuration (queue, priority class, GPU models) and the caller's
  // tenant; fills spec.tenant and spec.user.
  Status CheckSubmissionLocked(const Principal& p, JobSpec& spec);
  // Records a checked submission in memory and in `b`, or finds the job its idempotency key
  // already made (*created stays false); returns the job's id. `spec_json`: the spec's text.
  // `digest`: RequestDigest of the submission, kept with the job when it has a key. `audit`:
  // whether the job's submission has its own audit record (an array's elements share one).
  uint64_t AddJobLocked(const Principal& p, JobSpec spec,
                        std::shared_ptr<const std::string> spec_json, const std::string& idem_key,
                        const std::string& digest, store::WriteBatch* b, bool* created,
                        bool audit = true);
  // 422 when `idem_key` already made a job of this tenant and user from another submission
  // (`digest` differs from the one recorded with it); `what` names the submission in the message.
  Status CheckReplayLocked(const std::string& tenant, const std::string& user,
                           const std::string& idem_key, const std::string& digest,
                           const std::string& what);
  const api::UserConfig* FindUserLocked(const std::string& name) const;
  void RefreshUserIndexLocked();
  // Notes the CPU and memory a node's agent (or the built-in node) reported.
  // A node's images (its heartbeat, or the built-in node's executor): kept on its entry (mu_).
  void NodeImagesLocked(const std::string& node, const std::vector<NodeImage>& images);
  // The pre-pulls of a cycle's reservations (pre_pulls_).
  void PrePullsLocked(const core::Cluster& cluster,
                      const std::vector<core::Reservation>& reservations);
  // One report of a node's heartbeat, to ReportTaskStarted / Exited / Lost.
  void ApplyTaskReport(const TaskReport& r);
  // After a cycle's decisions are committed: its admitted jobs may start and its victims stop.
  void MarkDecisionsDurable(const core::CycleResult& result);
  void NoteReportedResourcesLocked(const Node& reported);
  // Raises the spec's per-task CPU and memory to the minimums.
  void ApplyTaskMinimums(JobSpec* spec) const;
  // The tenant's image registries, host paths and volumes (model/mounts.h): InvalidArgument
  // naming the field ("container_image", "mounts[0].path", "mounts[1].volume") and the rule
  // broken.
  Status CheckTenantBoundariesLocked(const std::string& tenant, const JobSpec& spec) const;
  // control_plane_identity.cc: gives every configured tenant without one its own uid, recorded
  // in `b`; the run_as of a job's tasks.
  void AllocateTenantUidsLocked(store::WriteBatch* b);
  RunAs RunAsLocked(const std::string& tenant, const std::string& user) const;
  void LoadTenantUidsLocked(const std::string& text);
  Status CanActOnJobLocked(const Principal& p, const JobEntry& j) const;
  // The state `action` (cancel, suspend, resume, retry) takes `j` to, or why it cannot (409, or
  // 404 for an unknown action).
  Result<JobState> ActionTargetLocked(const JobEntry& j, std::string_view action) const;
  // Takes `j` to `to` by `action` of `p` (checked by ActionTargetLocked); true when a stop is to
  // be published (PublishStops) once `b` is written.
  bool ApplyActionLocked(const Principal& p, JobEntry& j, std::string_view action, JobState to,
                         store::WriteBatch* b);
  // The array `id` if `p` may read its jobs, else 404 as for a missing one (another tenant's
  // array is audited as `audit_action` when that is not empty); its elements' ids.
  Result<const std::vector<uint64_t>*> FindArrayLocked(const Principal& p, uint64_t id,
                                                       std::string_view audit_action);
  // The array `id` (found) as the API returns it, without "changed".
  nlohmann::json ArrayJsonLocked(uint64_t id) const;
  void FinishExecutionLocked(JobEntry& j, store::WriteBatch* b);
  // Cancels or suspends `j` (state checked by the caller): started tasks are stopped by their
  // nodes (the placement stays until they report), unstarted ones release at once. True when a
  // stop is to be published to the nodes (PublishStops) once the batch is written.
  bool StopJobLocked(JobEntry& j, JobState to, std::string reason, store::WriteBatch* b);
  // The live jobs that `desired` would leave without their tenant, queue, priority class or
  // configured node, by id (all of them; ApplyConfig lists the first few).
  std::vector<AffectedJob> AffectedJobsLocked(const api::ClusterConfig& desired) const;
  // After the commit of the batch that recorded these jobs' stops: their nodes may act on them.
  void PublishStops(const std::vector<uint64_t>& ids);
  // The budget state of every tenant, indexed by its QueueId in the compiled tree.
  std::vector<core::TenantBudget> BudgetsLocked(TimeMs now);
  // `pending_ids` (ascending) and `pending_entries`: the jobs the cycle's input held as pending.
  // The verdicts are moved out of `r` into them.
  void ApplyCycleLocked(const core::CycleInput& in, core::CycleResult& r,
                        const std::vector<uint64_t>& pending_ids,
                        const std::vector<JobEntry*>& pending_entries, store::WriteBatch* b);
  // The earliest active job of each (tenant, user, name), for singleton dependencies; built by a
  // cycle at its first singleton job.
  using SingletonIndex = std::map<std::tuple<std::string, std::string, std::string>, uint64_t>;
  // A pending job with depends_on: true when it stays out of this cycle, waiting (its verdict
  // says for which job) or ended because a dependency can never hold (Slurm's
  // kill_invalid_depend).
  bool HoldForDependenciesLocked(JobEntry& j, std::optional<SingletonIndex>* singletons,
                                 store::WriteBatch* b);
  // A pending element of a throttled job array: true when it stays out of this cycle because its
  // array holds as many elements as it may (its verdict, ArrayThrottled, says so).
  bool HoldForArrayThrottleLocked(JobEntry& j, ArrayThrottle* throttle);

  // control_plane_services.cc. Each of these requires mu_.
  Status MayManageServiceLocked(const Principal& p, const ServiceEntry* e, const std::string& name,
                                std::string_view action) const;
  // Resolves and checks spec's tenant, queue, priority class and template against the
  // configuration (as a submission of one replica would be checked).
  Status CheckServiceSpecLocked(const Principal& p, ServiceSpec& spec);
  Status CheckTrafficLocked(const Service& s, const std::vector<TrafficSplit>& traffic) const;
  nlohmann::json ServiceJsonLocked(const ServiceEntry& e) const;
  store::ServiceRecord ServiceRecordLocked(const Service& s) const;
  void ServiceEventLocked(ServiceEntry& e, std::string message);
  // The replica count a service wants now: spec.replicas, or its autoscaler's.
  int32_t DesiredCountLocked(const ServiceEntry& e) const;
  // Autoscaling: one sample a second from the gateways' reports, a decision, its event; and the
  // scale-ups that reached their count (`ready`: the service's ready replicas).
  void AutoscaleLocked(ServiceEntry& e, TimeMs now, int32_t live, int32_t ready);
  void ReconcileServiceLocked(ServiceEntry& e, const std::map<uint64_t, ProbeStatus>& probes,
                              TimeMs now, store::WriteBatch* b, std::vector<uint64_t>* stops);
  Status StartReplicaLocked(ServiceEntry& e, int64_t revision, store::WriteBatch* b);
  void StopReplicaLocked(ReplicaState& st, std::string reason, store::WriteBatch* b,
                         std::vector<uint64_t>* stops);
  int32_t FreeServicePortLocked();
  // host:port of a replica's job ("" before it is placed); `probe`: as the server reaches it
  // (127.0.0.1 for the built-in node).
  std::string ReplicaAddressLocked(const JobEntry& j, bool probe) const;
  void PublishRoutesLocked();
  std::vector<ProbeTarget> ProbeTargetsLocked() const;
  void LoadServicesLocked(const std::vector<store::ServiceRecord>& records);
  // The change of a service answered: written with its audit record, then the object.
  Result<nlohmann::json> CommitServiceLocked(const Principal& p, ServiceEntry& e,
                                             std::string action, store::WriteBatch* b,
                                             std::shared_future<Status>* done);

  store::Store* store_;
  NowFn now_;
  mutable std::mutex mu_;
  std::condition_variable assign_cv_;  // WatchAssignments
  bool shutting_down_ = false;         // WakeAll was called
  std::function<void()> wake_scheduler_;
  bool loaded_ = false;

  api::ClusterConfig config_;
  NodeRegistry nodes_;  // node_registry.h
  JobTable jobs_;       // job_table.h
  JobWindow window_;    // set before Load
  // Some finished jobs are in the store only (evicted, or beyond the window at load): reads that
  // miss memory ask the store. Guarded by mu_.
  bool history_in_store_ = false;
  uint64_t compile_generation_ = 0;
  // Tokens and each configured user's tenant and role (its own lock, taken after mu_; users set
  // from config_.users under mu_ by RefreshUserIndexLocked whenever users change).
  TokenRegistry tokens_;
  // The OIDC issuer's tokens: its own locks (leaves); configured from config_.identity under mu_
  // by RefreshUserIndexLocked, used without mu_.
  OidcVerifier oidc_;
  bool ldap_configured_ = false;  // guarded by mu_
  std::vector<core::Nomination> nominations_;
  // Budgets: GPU time (milli-GPU x ms) of closed usage records per tenant since the start of the
  // tenant's current period, and that period's start.
  std::map<std::string, std::pair<TimeMs, int64_t>> closed_usage_;

  // Tenants' own uids (the kv record "tenant_uids"): kept for deleted tenants too, never reused.
  int64_t tenant_uid_base_ = 200000;
  std::map<std::string, int64_t> tenant_uids_;
  int64_t next_tenant_uid_ = 0;  // 0: tenant_uid_base_ + 1
  // The key the runs' step keys are derived from (the kv record "step_secret"; made once).
  std::string step_secret_;

  std::shared_ptr<Compiled> compiled_;  // shared: a cycle keeps the one it started with
  bool dirty_ = true;
  // The last cycle's input (the scheduler thread publishes it; guarded by mu_) and the expected
  // starts computed from it (its own locks: leaves; a computation never runs under mu_).
  std::shared_ptr<const CycleSnapshot> last_cycle_;
  std::unique_ptr<StartEstimates> estimates_;
  // By node: images the queue heads reserved there need and it lacks (guarded by mu_).
  std::map<std::string, std::vector<ImagePull>> pre_pulls_;

  ServiceTable services_;                            // service_table.h; guarded by mu_
  std::map<uint64_t, QuotaRequest> quota_requests_;  // quota_requests.h; by id; guarded by mu_
  // Registry credentials by (tenant, registry prefix); the password sealed. Guarded by mu_.
  struct RegistryCredential {
    std::string user;
    std::string sealed_password;
    int64_t created_ms = 0;
    std::string created_by;
  };
  std::map<std::pair<std::string, std::string>, RegistryCredential> registry_credentials_;
  std::unique_ptr<SecretBox> secret_box_;  // set before Load; immutable after
  uint64_t next_quota_request_id_ = 1;
  std::mutex quota_mu_;  // one quota decision or revert at a time; taken before mu_
  int32_t service_port_lo_ = 10000;
  int32_t service_port_hi_ = 19999;
  int32_t service_port_next_ = 0;        // where the search for a free port starts (round robin)
  std::unique_ptr<RoutesBoard> routes_;  // its own lock, taken after mu_
  ServingStats serving_;                 // its own lock; never taken with mu_ held
  std::string gateway_token_;            // InProcessGatewayToken

  EventLog events_;         // its own lock, taken after mu_
  TaskLimits task_limits_;  // set before serving; read without the lock
  Stats stats_;
  ServerMetrics metrics_;
  // Its own lock, taken after mu_ (events are raised under mu_); destroyed first, so its worker
  // stops before what it uses.
  std::unique_ptr<Webhooks> webhooks_;
};

}  // namespace arbiter::server
