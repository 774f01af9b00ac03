// The audit log for a SIEM (docs/governance.md, "Export"): every committed audit record, in seq
// order, as one JSON line appended to a file (--audit-file) and/or as an RFC 5424 syslog message
// of facility authpriv (--audit-syslog udp://HOST:PORT or unix:PATH).
//
// Each sink is an AuditExporter: a thread that reads the records after its cursor from the store
// (so audit writing stays as it is: enqueued with the change, never waited for), hands them to the
// sink, and then moves its cursor, kept in a small file of the data directory. A record is
// therefore exported at least once: after a crash between a sink's write and the cursor's, the
// records of that one batch are sent again (a restart after a clean stop sends none twice).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "store/records.h"
#include "store/store.h"

namespace arbiter::server {

// A record as GET /api/v1/audit and the exports show it.
nlohmann::json AuditRecordJson(const store::AuditRecord& r);

// Where records go. Write sends a batch, in order; an error leaves the cursor where it was, and the
// batch is sent again later.
class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual std::string Name() const = 0;
  virtual Status Write(const std::vector<store::AuditRecord>& records) = 0;
  // Asks the sink to reopen what it writes to (SIGHUP; a rotated file).
  virtual void Reopen() {}
};

// One JSON line per record appended to `path` (O_APPEND, one write() per line, fsync per batch). A
// file moved away (log rotation) is noticed before each batch and `path` is opened afresh.
Result<std::unique_ptr<AuditSink>> OpenAuditFileSink(const std::string& path);

// RFC 5424 messages, facility authpriv, app-name "arbiter", msgid "audit", the record's JSON as the
// message: `target` is udp://HOST:PORT (IPv6 hosts in brackets) or unix:PATH (a datagram socket,
// e.g. /dev/log).
Result<std::unique_ptr<AuditSink>> OpenAuditSyslogSink(const std::string& target);
// The message of one record (exposed for tests): "<PRI>1 TIME HOST arbiter PID audit - JSON".
std::string SyslogMessage(const store::AuditRecord& r, const std::string& hostname, int pid);

class AuditExporter {
 public:
  // `cursor_path`: the file that keeps the last exported seq (created when missing: from seq 0).
  AuditExporter(store::Store* store, std::unique_ptr<AuditSink> sink, std::string cursor_path);
  ~AuditExporter();
  AuditExporter(const AuditExporter&) = delete;
  AuditExporter& operator=(const AuditExporter&) = delete;

  // Reads the cursor and starts the thread.
  Status Start();
  // Exports what is committed by now, then stops the thread. Call before the store is closed.
  void Stop();
  void Reopen();
  uint64_t exported_seq() const;

  static constexpr int64_t kPollMs = 200;
  static constexpr size_t kBatch = 500;

 private:
  void Loop();
  // Exports one batch; false when there was nothing to export or the sink failed.
  bool ExportBatch();
  Status SaveCursor(uint64_t seq);

  store::Store* const store_;
  std::unique_ptr<AuditSink> sink_;
  const std::string cursor_path_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  bool reopen_ = false;    // guarded by mu_
  uint64_t cursor_ = 0;    // guarded by mu_ (written by the thread only)
  bool failing_ = false;   // thread only: the last batch failed (logged once per streak)
  std::thread thread_;
};

}  // namespace arbiter::server
