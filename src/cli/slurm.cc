#include "cli/slurm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>

#include "cli/suggest.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

// Every Slurm job state, by code and long name.
constexpr SlurmState kJobStates[] = {
    {"PD", "PENDING"},      {"R", "RUNNING"},         {"S", "SUSPENDED"},
    {"CG", "COMPLETING"},   {"CD", "COMPLETED"},      {"CF", "CONFIGURING"},
    {"CA", "CANCELLED"},    {"F", "FAILED"},          {"TO", "TIMEOUT"},
    {"PR", "PREEMPTED"},    {"NF", "NODE_FAIL"},      {"BF", "BOOT_FAIL"},
    {"DL", "DEADLINE"},     {"OOM", "OUT_OF_MEMORY"}, {"RD", "RESV_DEL_HOLD"},
    {"RF", "REQUEUE_FED"},  {"RH", "REQUEUE_HOLD"},   {"RQ", "REQUEUED"},
    {"RS", "RESIZING"},     {"RV", "REVOKED"},        {"SI", "SIGNALING"},
    {"SE", "SPECIAL_EXIT"}, {"SO", "STAGE_OUT"},      {"ST", "STOPPED"}};

struct StateMapping {
  std::string_view arbiter;
  SlurmState slurm;
};
constexpr StateMapping kMapping[] = {
    {"pending", {"PD", "PENDING"}},      {"retry-wait", {"PD", "PENDING"}},
    {"admitted", {"CF", "CONFIGURING"}}, {"starting", {"CF", "CONFIGURING"}},
    {"running", {"R", "RUNNING"}},       {"suspended", {"S", "SUSPENDED"}},
    {"preempting", {"PR", "PREEMPTED"}}, {"preempted", {"PR", "PREEMPTED"}},
    {"lost", {"NF", "NODE_FAIL"}},       {"succeeded", {"CD", "COMPLETED"}},
    {"failed", {"F", "FAILED"}},         {"cancelled", {"CA", "CANCELLED"}},
    {"timed-out", {"TO", "TIMEOUT"}},    {"awaiting_approval", {"PD", "PENDING"}},
    {"rejected", {"CA", "CANCELLED"}}};

bool IsEnded(std::string_view s) {
  return s == "succeeded" || s == "failed" || s == "cancelled" || s == "timed-out" ||
         s == "rejected";
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = Trim(text.substr(start, comma - start));
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

// --- Job states ------------------------------------------------------------------------------

SlurmState SlurmStateFor(std::string_view state, bool stopping) {
  if (stopping && IsEnded(state)) return {"CG", "COMPLETING"};
  for (const StateMapping& m : kMapping) {
    if (m.arbiter == state) return m.slurm;
  }
  return {"?", "UNKNOWN"};
}

SlurmState SlurmStateOf(const json& job) {
  const auto it = job.find("state");
  const std::string state = it != job.end() && it->is_string() ? it->get<std::string>() : "";
  return SlurmStateFor(state, job.contains("stopping"));
}

Result<std::set<std::string>> ParseSlurmJobStates(std::string_view list, std::string_view flag) {
  std::set<std::string> codes;
  std::vector<std::string> known;
  for (const SlurmState& s : kJobStates) {
    known.emplace_back(s.code);
    known.emplace_back(s.name);
  }
  const std::vector<std::string> items = SplitCommas(list);
  if (items.empty()) return InvalidArgument(std::string(flag), "needs a state (PD, R, ... or all)");
  for (const std::string& item : items) {
    const std::string want = Upper(item);
    if (want == "ALL") {
      for (const SlurmState& s : kJobStates) codes.emplace(s.code);
      continue;
    }
    bool found = false;
    for (const SlurmState& s : kJobStates) {
      if (want == s.code || want == s.name) {
        codes.emplace(s.code);
        found = true;
      }
    }
    if (!found) {
      std::string all;
      for (const SlurmState& s : kJobStates)
        all += fmt::format("{}{}", all.empty() ? "" : ", ", s.code);
      return InvalidArgument(std::string(flag),
                             fmt::format("unknown job state '{}'{}; states: {} (or their names, "
                                         "PENDING, RUNNING, ...), or all",
                                         item, DidYouMean(want, known), all));
    }
  }
  return codes;
}

std::vector<std::string> ArbiterStatesFor(const std::set<std::string>& codes) {
  std::vector<std::string> out;
  for (const StateMapping& m : kMapping) {
    if (codes.count(std::string(m.slurm.code)) || (codes.count("CG") && IsEnded(m.arbiter))) {
      out.emplace_back(m.arbiter);
    }
  }
  return out;
}

// --- Node states -----------------------------------------------------------------------------

SlurmState SlurmNodeState(const NodeUse& n) {
  if (n.state == "down") return {"down", "DOWN"};
  if (n.state == "cordoned" || n.state == "draining") {
    return n.jobs > 0 ? SlurmState{"drng", "DRAINING"} : SlurmState{"drain", "DRAINED"};
  }
  if (n.state != "ready") return {"unk", "UNKNOWN"};
  const bool full = n.gpus > 0 ? n.gpu_milli_used >= n.gpus * 1000
                               : n.cpu_milli > 0 && n.cpu_milli_used >= n.cpu_milli;
  if (full) return {"alloc", "ALLOCATED"};
  if (n.jobs > 0 || n.gpu_milli_used > 0 || n.cpu_milli_used > 0) return {"mix", "MIXED"};
  return {"idle", "IDLE"};
}

Result<std::set<std::string>> ParseSlurmNodeStates(std::string_view list, std::string_view flag) {
  // Slurm's names; those Arbiter's nodes are never in select nothing.
  static const std::map<std::string, std::vector<std::string>> kNames = {
      {"alloc", {"ALLOCATED"}},
      {"allocated", {"ALLOCATED"}},
      {"mix", {"MIXED"}},
      {"mixed", {"MIXED"}},
      {"idle", {"IDLE"}},
      {"drain", {"DRAINED", "DRAINING"}},
      {"drained", {"DRAINED"}},
      {"drng", {"DRAINING"}},
      {"draining", {"DRAINING"}},
      {"down", {"DOWN"}},
      {"unk", {"UNKNOWN"}},
      {"unknown", {"UNKNOWN"}},
      {"all", {"ALLOCATED", "MIXED", "IDLE", "DRAINED", "DRAINING", "DOWN", "UNKNOWN"}},
      {"blocked", {}},
      {"cloud", {}},
      {"comp", {}},
      {"completing", {}},
      {"fail", {}},
      {"failing", {}},
      {"future", {}},
      {"inval", {}},
      {"maint", {}},
      {"no_respond", {}},
      {"npc", {}},
      {"perfctrs", {}},
      {"planned", {}},
      {"power_down", {}},
      {"powered_down", {}},
      {"powering_down", {}},
      {"powering_up", {}},
      {"reboot_issued", {}},
      {"reboot_requested", {}},
      {"reserved", {}},
      {"resv", {}}};
  std::set<std::string> out;
  const std::vector<std::string> items = SplitCommas(list);
  if (items.empty()) return InvalidArgument(std::string(flag), "needs a state (idle, mix, ...)");
  for (const std::string& item : items) {
    auto it = kNames.find(Lower(item));
    if (it == kNames.end()) {
      std::vector<std::string> known;
      for (const auto& [name, states] : kNames) known.push_back(name);
      return InvalidArgument(std::string(flag),
                             fmt::format("unknown node state '{}'{}; states: idle, mix, alloc, "
                                         "drain, drained, draining, down (or Slurm's others)",
                                         item, DidYouMean(Lower(item), known)));
    }
    out.insert(it->second.begin(), it->second.end());
  }
  return out;
}

// --- Durations and times -----------------------------------------------------------------------

std::string SqueueDuration(int64_t s) {
  s = std::max<int64_t>(0, s);
  const int64_t days = s / 86400, hours = s / 3600 % 24, minutes = s / 60 % 60, seconds = s % 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:{:02}", days, hours, minutes, seconds);
  if (hours > 0) return fmt::format("{}:{:02}:{:02}", hours, minutes, seconds);
  return fmt::format("{}:{:02}", minutes, seconds);
}

std::string SacctDuration(int64_t s) {
  s = std::max<int64_t>(0, s);
  const int64_t days = s / 86400, hours = s / 3600 % 24, minutes = s / 60 % 60, seconds = s % 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:{:02}", days, hours, minutes, seconds);
  return fmt::format("{:02}:{:02}:{:02}", hours, minutes, seconds);
}

std::string SlurmTimestamp(int64_t epoch_seconds) {
  const std::time_t t = static_cast<std::time_t>(epoch_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

namespace {

// Seconds since the epoch of a local date and time (normalised by mktime: day 32 is fine).
int64_t LocalTime(int year, int month, int day, int hour, int minute, int second) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&tm));
}

std::tm LocalTm(int64_t epoch) {
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// Reads exactly `n` digits at `*s` (advancing it); -1 when they are not there.
int Digits(std::string_view* s, size_t n) {
  if (s->size() < n) return -1;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = (*s)[i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  s->remove_prefix(n);
  return v;
}

// "HH:MM[:SS]" at the whole of `s`; false when it is not one.
bool ClockTime(std::string_view s, int* h, int* m, int* sec) {
  *sec = 0;
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 2) return false;
  std::string_view hh = s.substr(0, colon);
  *h = Digits(&hh, hh.size());
  s.remove_prefix(colon + 1);
  *m = Digits(&s, 2);
  if (*h < 0 || *h > 23 || *m < 0 || *m > 59) return false;
  if (s.empty()) return true;
  if (s.front() != ':') return false;
  s.remove_prefix(1);
  *sec = Digits(&s, 2);
  return *sec >= 0 && *sec <= 60 && s.empty();
}

// "now", "now-1days", "now+30minutes", "now-60" (seconds).
std::optional<int64_t> NowRelative(std::string_view s, int64_t now) {
  if (s.rfind("now", 0) != 0) return std::nullopt;
  s.remove_prefix(3);
  if (s.empty()) return now;
  const int sign = s.front() == '-' ? -1 : s.front() == '+' ? 1 : 0;
  if (sign == 0) return std::nullopt;
  s.remove_prefix(1);
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0 || digits > 9) return std::nullopt;
  std::string_view num = s.substr(0, digits);
  const int64_t n = Digits(&num, digits);
  const std::string unit(s.substr(digits));
  struct Unit {
    const char* names[6];
    int64_t seconds;
  };
  static const Unit kUnits[] = {{{"", "s", "sec", "secs", "second", "seconds"}, 1},
                                {{"m", "min", "mins", "minute", "minutes", nullptr}, 60},
                                {{"h", "hour", "hours", nullptr, nullptr, nullptr}, 3600},
                                {{"d", "day", "days", nullptr, nullptr, nullptr}, 86400},
                                {{"w", "week", "weeks", nullptr, nullptr, nullptr}, 7 * 86400}};
  int64_t scale = 0;
  for (const Unit& u : kUnits) {
    for (const char* name : u.names) {
      if (name != nullptr && unit == name) scale = u.seconds;
    }
  }
  if (scale == 0) return std::nullopt;
  return now + sign * n * scale;
}

// A date: YYYY-MM-DD, MM/DD[/YY], MM.DD[.YY], MMDD[YY]; the rest of `*s` is left.
bool Date(std::string_view* s, int this_year, int* y, int* mo, int* d) {
  std::string_view t = *s;
  if (t.size() >= 10 && t[4] == '-' && t[7] == '-') {
    *y = Digits(&t, 4);
    t.remove_prefix(1);
    *mo = Digits(&t, 2);
    t.remove_prefix(1);
    *d = Digits(&t, 2);
  } else if (t.size() >= 5 && (t[2] == '/' || t[2] == '.')) {
    const char sep = t[2];
    *mo = Digits(&t, 2);
    t.remove_prefix(1);
    *d = Digits(&t, 2);
    *y = this_year;
    if (!t.empty() && t.front() == sep) {
      t.remove_prefix(1);
      const int yy = Digits(&t, 2);
      *y = yy < 0 ? -1 : 2000 + yy;
    }
  } else if (t.size() >= 4 && std::all_of(t.begin(), t.begin() + 4, [](char c) {
               return std::isdigit(static_cast<unsigned char>(c));
             })) {
    *mo = Digits(&t, 2);
    *d = Digits(&t, 2);
    *y = this_year;
    if (t.size() >= 2 && std::isdigit(static_cast<unsigned char>(t[0]))) {
      const int yy = Digits(&t, 2);
      *y = yy < 0 ? -1 : 2000 + yy;
    }
  } else {
    return false;
  }
  if (*y < 1970 || *mo < 1 || *mo > 12 || *d < 1 || *d > 31) return false;
  *s = t;
  return true;
}

}  // namespace

Result<int64_t> ParseSlurmDateTime(std::string_view text, int64_t now, std::string_view flag) {
  const std::string s = Lower(Trim(text));
  const std::tm today = LocalTm(now);
  const int y0 = today.tm_year + 1900, m0 = today.tm_mon + 1, d0 = today.tm_mday;
  if (auto rel = NowRelative(s, now)) return *rel;
  static const std::map<std::string, std::pair<int, int>> kNamed = {
      {"today", {0, 0}}, {"midnight", {0, 0}}, {"noon", {0, 12}},   {"elevenses", {0, 11}},
      {"fika", {0, 15}}, {"teatime", {0, 16}}, {"tomorrow", {1, 0}}};
  if (auto it = kNamed.find(s); it != kNamed.end()) {
    return LocalTime(y0, m0, d0 + it->second.first, it->second.second, 0, 0);
  }
  int h = 0, mi = 0, sec = 0;
  if (ClockTime(s, &h, &mi, &sec)) return LocalTime(y0, m0, d0, h, mi, sec);
  std::string_view rest = s;
  int y = 0, mo = 0, d = 0;
  if (Date(&rest, y0, &y, &mo, &d)) {
    if (rest.empty()) return LocalTime(y, mo, d, 0, 0, 0);
    if ((rest.front() == 't' || rest.front() == '-') && ClockTime(rest.substr(1), &h, &mi, &sec)) {
      return LocalTime(y, mo, d, h, mi, sec);
    }
  }
  return InvalidArgument(std::string(flag),
                         fmt::format("'{}' is not a time: use YYYY-MM-DD[THH:MM[:SS]], "
                                     "MM/DD[/YY], HH:MM[:SS], now-1days, now-3hours, today, "
                                     "midnight, noon or tomorrow",
                                     Trim(text)));
}

// --- Host lists ------------------------------------------------------------------------------

namespace {

// A name split at its trailing digits: "gpu-07" is ("gpu-", "07").
std::pair<std::string, std::string> SplitNumber(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  return {name.substr(0, i), name.substr(i)};
}

int64_t Number(const std::string& digits) {
  int64_t v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

std::string CompressHostlist(std::vector<std::string> names) {
  // prefix -> its numbers (as written), sorted by value; names without one stand alone.
  std::map<std::string, std::vector<std::string>> numbered;
  std::vector<std::string> plain;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& n : names) {
    auto [prefix, digits] = SplitNumber(n);
    if (digits.empty() || digits.size() > 18) {
      plain.push_back(n);
    } else {
      numbered[prefix].push_back(digits);
    }
  }
  std::vector<std::pair<std::string, std::string>> parts;  // (sort key, text)
  for (const std::string& p : plain) parts.emplace_back(p, p);
  for (auto& [prefix, nums] : numbered) {
    std::sort(nums.begin(), nums.end(), [](const std::string& a, const std::string& b) {
      return Number(a) != Number(b) ? Number(a) < Number(b) : a < b;
    });
    if (nums.size() == 1) {
      parts.emplace_back(prefix + nums[0], prefix + nums[0]);
      continue;
    }
    // Ranges of consecutive numbers written alike: zero-padded ones of one width, or unpadded.
    std::string ranges;
    for (size_t i = 0; i < nums.size();) {
      const bool padded = nums[i].size() > 1 && nums[i][0] == '0';
      size_t j = i;
      while (j + 1 < nums.size() && Number(nums[j + 1]) == Number(nums[j]) + 1 &&
             (padded ? nums[j + 1].size() == nums[i].size() : nums[j + 1][0] != '0')) {
        ++j;
      }
      ranges += fmt::format("{}{}", ranges.empty() ? "" : ",",
                            i == j ? nums[i] : fmt::format("{}-{}", nums[i], nums[j]));
      i = j + 1;
    }
    parts.emplace_back(prefix + nums[0], fmt::format("{}[{}]", prefix, ranges));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& [key, text] : parts) out += (out.empty() ? "" : ",") + text;
  return out;
}

Result<std::vector<std::string>> ExpandHostlist(std::string_view list, std::string_view flag) {
  constexpr size_t kMaxNames = 100000;
  std::vector<std::string> out;
  auto bad = [&](std::string_view why) {
    return InvalidArgument(std::string(flag),
                           fmt::format("'{}' is not a host list: {}", list, why));
  };
  size_t start = 0;
  while (start < list.size()) {
    // One item: up to the next comma outside brackets.
    size_t end = start;
    int depth = 0;
    for (; end < list.size() && (depth > 0 || list[end] != ','); ++end) {
      depth += list[end] == '[' ? 1 : list[end] == ']' ? -1 : 0;
      if (depth < 0 || depth > 1) return bad("unbalanced brackets");
    }
    if (depth != 0) return bad("unbalanced brackets");
    const std::string_view item = Trim(list.substr(start, end - start));
    start = end + 1;
    if (item.empty()) continue;
    const size_t open = item.find('[');
    if (open == std::string_view::npos) {
      out.emplace_back(item);
      continue;
    }
    const size_t close = item.find(']', open);
    const std::string prefix(item.substr(0, open));
    const std::string suffix(item.substr(close + 1));
    for (const std::string& range : SplitCommas(item.substr(open + 1, close - open - 1))) {
      const size_t dash = range.find('-');
      const std::string lo = range.substr(0, dash);
      const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      auto digits = [](const std::string& d) {
        return !d.empty() && d.size() <= 18 &&
               std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
      };
      if (!digits(lo) || !digits(hi) || Number(hi) < Number(lo)) {
        return bad(fmt::format("'{}' is not a range", range));
      }
      const size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
      for (int64_t n = Number(lo); n <= Number(hi); ++n) {
        if (out.size() >= kMaxNames) return bad("more than 100000 names");
        out.push_back(fmt::format("{}{:0{}}{}", prefix, n, width, suffix));
      }
    }
  }
  return out;
}

}  // namespace arbiter::cli
