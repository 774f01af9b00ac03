#include "exec/shim_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace arbiter::exec {

namespace {

void Put(std::string* out, const char* tag, const std::string& value) {
  *out += tag;
  *out += ' ';
  *out += std::to_string(value.size());
  *out += '\n';
  *out += value;
  *out += '\n';
}

void PutInt(std::string* out, const char* tag, int64_t v) { Put(out, tag, std::to_string(v)); }

bool ToInt(const std::string& s, int64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

std::string EncodeShimSpec(const ShimSpec& s) {
  std::string out;
  PutInt(&out, "job", static_cast<int64_t>(s.job));
  PutInt(&out, "task", s.task);
  PutInt(&out, "attempt", static_cast<int64_t>(s.attempt));
  for (const std::string& a : s.argv) Put(&out, "arg", a);
  for (const std::string& e : s.env) Put(&out, "env", e);
  Put(&out, "cwd", s.cwd);
  PutInt(&out, "uid", s.uid);
  PutInt(&out, "gid", s.gid);
  for (int64_t g : s.groups) PutInt(&out, "group", g);
  PutInt(&out, "no_new_privs", s.no_new_privs ? 1 : 0);
  Put(&out, "stdout", s.stdout_path);
  Put(&out, "stderr", s.stderr_path);
  Put(&out, "log", s.log_path);
  Put(&out, "runs", s.runs_path);
  for (const std::string& p : s.cgroup_procs) Put(&out, "cgroup_procs", p);
  for (const std::string& d : s.cgroup_dirs) Put(&out, "cgroup_dir", d);
  PutInt(&out, "rlimit_nproc", s.rlimit_nproc);
  PutInt(&out, "grace_ms", s.grace_ms);
  PutInt(&out, "walltime_ms", s.walltime_ms);
  PutInt(&out, "orphan_timeout_ms", s.orphan_timeout_ms);
  Put(&out, "heartbeat", s.heartbeat_path);
  Put(&out, "pid_path", s.pid_path);
  Put(&out, "exit_path", s.exit_path);
  for (const std::string& a : s.cleanup_argv) Put(&out, "cleanup_arg", a);
  if (s.stop_spares_main) PutInt(&out, "stop_spares_main", 1);
  out += "end 0\n\n";
  return out;
}

bool DecodeShimSpec(const std::string& text, ShimSpec* s, std::string* error) {
  static const char* const kIntTags[] = {
      "job",      "task",        "attempt",           "uid",
      "gid",      "group",       "no_new_privs",      "rlimit_nproc",
      "grace_ms", "walltime_ms", "orphan_timeout_ms", "stop_spares_main"};
  *s = ShimSpec{};
  size_t at = 0;
  bool ended = false;
  while (at < text.size() && !ended) {
    const size_t space = text.find(' ', at);
    const size_t eol = space == std::string::npos ? space : text.find('\n', space);
    int64_t len = 0;
    if (eol == std::string::npos || !ToInt(text.substr(space + 1, eol - space - 1), &len) ||
        len < 0 || eol + 1 + static_cast<size_t>(len) + 1 > text.size() ||
        text[eol + 1 + static_cast<size_t>(len)] != '\n') {
      *error = "malformed record at byte " + std::to_string(at);
      return false;
    }
    const std::string tag = text.substr(at, space - at);
    const std::string value = text.substr(eol + 1, static_cast<size_t>(len));
    at = eol + 1 + static_cast<size_t>(len) + 1;
    int64_t n = 0;
    const bool int_tag =
        std::find(std::begin(kIntTags), std::end(kIntTags), tag) != std::end(kIntTags);
    if (int_tag && !ToInt(value, &n)) {
      *error = "record " + tag + " is not a number";
      return false;
    }
    if (tag == "end") {
      ended = true;
    } else if (tag == "arg") {
      s->argv.push_back(value);
    } else if (tag == "env") {
      s->env.push_back(value);
    } else if (tag == "cwd") {
      s->cwd = value;
    } else if (tag == "stdout") {
      s->stdout_path = value;
    } else if (tag == "stderr") {
      s->stderr_path = value;
    } else if (tag == "log") {
      s->log_path = value;
    } else if (tag == "runs") {
      s->runs_path = value;
    } else if (tag == "cgroup_procs") {
      s->cgroup_procs.push_back(value);
    } else if (tag == "cgroup_dir") {
      s->cgroup_dirs.push_back(value);
    } else if (tag == "heartbeat") {
      s->heartbeat_path = value;
    } else if (tag == "pid_path") {
      s->pid_path = value;
    } else if (tag == "exit_path") {
      s->exit_path = value;
    } else if (tag == "cleanup_arg") {
      s->cleanup_argv.push_back(value);
    } else if (!int_tag) {
      *error = "unknown record " + tag;
      return false;
    } else if (tag == "job") {
      s->job = static_cast<uint64_t>(n);
    } else if (tag == "task") {
      s->task = static_cast<int32_t>(n);
    } else if (tag == "attempt") {
      s->attempt = static_cast<uint64_t>(n);
    } else if (tag == "uid") {
      s->uid = n;
    } else if (tag == "gid") {
      s->gid = n;
    } else if (tag == "group") {
      s->groups.push_back(n);
    } else if (tag == "no_new_privs") {
      s->no_new_privs = n != 0;
    } else if (tag == "rlimit_nproc") {
      s->rlimit_nproc = n;
    } else if (tag == "grace_ms") {
      s->grace_ms = n;
    } else if (tag == "walltime_ms") {
      s->walltime_ms = n;
    } else if (tag == "orphan_timeout_ms") {
      s->orphan_timeout_ms = n;
    } else if (tag == "stop_spares_main") {
      s->stop_spares_main = n != 0;
    }
  }
  if (!ended) {
    *error = "the spec ends early";
    return false;
  }
  if (s->argv.empty() || s->argv[0].empty()) {
    *error = "no program to run";
    return false;
  }
  return true;
}

std::string EncodeExitRecord(const ExitRecord& r) {
  return "exit " + std::to_string(r.code) + " timed_out " + (r.timed_out ? "1" : "0") +
         " orphaned " + (r.orphaned ? "1" : "0") + " failed_to_start " +
         (r.failed_to_start ? "1" : "0") + "\n";
}

bool DecodeExitRecord(const std::string& text, ExitRecord* r) {
  std::istringstream in(text);
  std::string word;
  int timed_out = 0;
  int orphaned = 0;
  int failed = 0;
  if (!(in >> word) || word != "exit" || !(in >> r->code)) return false;
  while (in >> word) {
    if (word == "timed_out") in >> timed_out;
    if (word == "orphaned") in >> orphaned;
    if (word == "failed_to_start") in >> failed;
  }
  r->timed_out = timed_out != 0;
  r->orphaned = orphaned != 0;
  r->failed_to_start = failed != 0;
  return true;
}

std::string EncodeRunStart(const RunStart& r) {
  return "run " + std::to_string(r.attempt) + " " + std::to_string(r.out) + " " +
         std::to_string(r.err) + " " + std::to_string(r.log) + "\n";
}

std::vector<RunStart> DecodeRunIndex(const std::string& text) {
  std::vector<RunStart> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t eol = text.find('\n', at);
    if (eol == std::string::npos) break;  // torn: its writer has not finished it
    std::istringstream line(text.substr(at, eol - at));
    at = eol + 1;
    std::string word;
    RunStart r;
    std::string rest;
    if (line >> word >> r.attempt >> r.out >> r.err >> r.log && word == "run" && !(line >> rest)) {
      out.push_back(r);
    }
  }
  return out;
}

namespace {

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

bool AppendRunStart(const std::string& runs_path, uint64_t attempt, const std::string& out_path,
                    const std::string& err_path, const std::string& log_path) {
  if (runs_path.empty()) return true;
  const std::string line =
      EncodeRunStart({attempt, SizeOf(out_path), SizeOf(err_path), SizeOf(log_path)});
  const int fd = ::open(runs_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  return ok;
}

bool DecodePidRecord(const std::string& text, PidRecord* r) {
  std::istringstream in(text);
  if (!(in >> r->pid) || r->pid <= 1) return false;
  r->has_attempt = static_cast<bool>(in >> r->attempt);
  in >> r->start_time >> r->boot_id;
  return true;
}

std::string BootId() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

namespace {

// Fields 3 (state) and 22 (start time) of /proc/PID/stat; false when the process is gone.
bool ReadStat(int64_t pid, std::string* state, std::string* start_time) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 > stat.size()) return false;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3) *state = field;
    if (i == 22) {
      *start_time = field;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string ProcessStartTime(int64_t pid) {
  std::string state, start;
  return ReadStat(pid, &state, &start) ? start : "";
}

bool PidRecordAlive(const PidRecord& r) {
  if (!r.boot_id.empty() && r.boot_id != BootId()) return false;
  std::string state, start;
  if (!ReadStat(r.pid, &state, &start)) return false;
  if (state == "Z" || state == "X") return false;  // exited; its parent has not reaped it yet
  return r.start_time.empty() || start == r.start_time;
}

}  // namespace arbiter::exec
