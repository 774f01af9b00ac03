#include "bench/serving_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <sstream>

namespace arbiter::bench {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" as seconds since the epoch; false otherwise.
bool ParseTimestamp(const std::string& s, double* out) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, n = 0;
  double sec = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d %2d:%2d:%lf%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
      static_cast<size_t>(n) != s.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || sec < 0 || sec >= 61) {
    return false;
  }
  *out = static_cast<double>(DaysFromCivil(y, mo, d)) * 86400.0 + h * 3600.0 + mi * 60.0 + sec;
  return true;
}

bool ParseCount(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::stoi(s);
  return true;
}

}  // namespace

bool ParseLlmTrace(std::istream& in, std::vector<TraceRequest>* out, std::string* error) {
  out->clear();
  std::string line;
  int64_t number = 0;
  std::vector<double> stamps;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1) {
      if (line != "TIMESTAMP,ContextTokens,GeneratedTokens") {
        *error = "line 1: the header must be TIMESTAMP,ContextTokens,GeneratedTokens";
        return false;
      }
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    if (f.size() != 3) {
      *error =
          "line " + std::to_string(number) + ": 3 fields expected, got " + std::to_string(f.size());
      return false;
    }
    double at = 0;
    TraceRequest r;
    if (!ParseTimestamp(f[0], &at)) {
      *error = "line " + std::to_string(number) +
               ": TIMESTAMP must be YYYY-MM-DD HH:MM:SS.fraction, got \"" + f[0] + "\"";
      return false;
    }
    if (!ParseCount(f[1], &r.context_tokens)) {
      *error = "line " + std::to_string(number) + ": ContextTokens must be a count, got \"" + f[1] +
               "\"";
      return false;
    }
    if (!ParseCount(f[2], &r.generated_tokens)) {
      *error = "line " + std::to_string(number) + ": GeneratedTokens must be a count, got \"" +
               f[2] + "\"";
      return false;
    }
    stamps.push_back(at);
    out->push_back(r);
  }
  if (number == 0) {
    *error = "line 1: empty file, the header TIMESTAMP,ContextTokens,GeneratedTokens expected";
    return false;
  }
  if (out->empty()) {
    *error = "no request after the header";
    return false;
  }
  const double first = *std::min_element(stamps.begin(), stamps.end());
  for (size_t i = 0; i < out->size(); ++i) (*out)[i].at_s = stamps[i] - first;
  std::stable_sort(out->begin(), out->end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.at_s < b.at_s; });
  return true;
}

double RateMultiplier(const DayNight& d, double t) {
  return d.trough + (1 - d.trough) * (1 - std::cos(2 * std::numbers::pi * t / d.period_s)) / 2;
}

double TraceSecondsAt(const DayNight& d, double speedup, double t) {
  const double w = 2 * std::numbers::pi / d.period_s;
  return speedup * (d.trough * t + (1 - d.trough) * (t / 2 - std::sin(w * t) / (2 * w)));
}

int ServiceTimeMs(const ServiceTimeModel& m, int context_tokens, int generated_tokens) {
  return static_cast<int>(std::lround(m.prefill_ms_per_token * context_tokens +
                                      m.decode_ms_per_token * generated_tokens));
}

std::vector<Arrival> ArrivalSchedule(const std::vector<TraceRequest>& trace, const DayNight& d,
                                     double speedup, double duration_s,
                                     const ServiceTimeModel& model) {
  std::vector<Arrival> out;
  if (trace.empty() || speedup <= 0 || duration_s <= 0) return out;
  const double span = trace.back().at_s;
  const double gap = trace.size() > 1 ? span / static_cast<double>(trace.size() - 1) : 1.0;
  const double loop = span + gap;  // the trace again from its start, one mean gap later
  const double total = TraceSecondsAt(d, speedup, duration_s);
  double lo = 0;  // arrivals come in trace order: each search starts at the last one's time
  for (int64_t k = 0;; ++k) {
    const double base = static_cast<double>(k) * loop;
    if (base >= total) break;
    for (const TraceRequest& r : trace) {
      const double x = base + r.at_s;
      if (x >= total) break;
      double a = lo, b = duration_s;
      for (int i = 0; i < 60 && b - a > 1e-7; ++i) {
        const double mid = (a + b) / 2;
        (TraceSecondsAt(d, speedup, mid) < x ? a : b) = mid;
      }
      lo = b;
      out.push_back({b, ServiceTimeMs(model, r.context_tokens, r.generated_tokens)});
    }
  }
  return out;
}

int PeakReplicas(const std::vector<Arrival>& arrivals, double window_s, int max_concurrency,
                 double utilization) {
  double peak_work_s = 0;  // service seconds arriving within the busiest window
  double work_s = 0;
  size_t first = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    work_s += arrivals[i].delay_ms / 1000.0;
    while (arrivals[i].at_s - arrivals[first].at_s > window_s) {
      work_s -= arrivals[first].delay_ms / 1000.0;
      ++first;
    }
    peak_work_s = std::max(peak_work_s, work_s);
  }
  const double busy_slots = peak_work_s / window_s;  // mean requests in service
  const double per_replica = std::max(1, max_concurrency) * std::clamp(utilization, 0.01, 1.0);
  return std::max(1, static_cast<int>(std::ceil(busy_slots / per_replica - 1e-9)));
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

LatencyFigures ComputeLatencies(const std::vector<RequestOutcome>& outcomes, double slo_ms) {
  LatencyFigures f;
  std::vector<double> ok;
  ok.reserve(outcomes.size());
  int64_t within = 0;
  for (const RequestOutcome& o : outcomes) {
    ++f.requests;
    if (!o.ok) {
      ++f.failed;
      continue;
    }
    ok.push_back(o.latency_ms);
    within += o.latency_ms <= slo_ms ? 1 : 0;
  }
  f.slo_attainment = f.requests > 0 ? static_cast<double>(within) / f.requests : 0;
  f.p50_ms = Percentile(ok, 50);
  f.p99_ms = Percentile(ok, 99);
  return f;
}

std::vector<TrainingRun> ParseTrainingRuns(const std::string& text) {
  std::vector<TrainingRun> runs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string what;
    int64_t ms = 0;
    int64_t step = 0;
    if (!(l >> what >> ms >> step) || ms <= 0) continue;
    if (what == "start") {
      runs.push_back({ms, 0, 0, false, false});
      continue;
    }
    if (runs.empty() || runs.back().end_ms != 0) continue;
    TrainingRun& r = runs.back();
    if (what == "ckpt") {
      r.last_checkpoint_ms = ms;
    } else if (what == "term") {
      r.end_ms = ms;
      r.terminated = true;
    } else if (what == "end") {
      r.end_ms = ms;
      r.finished = true;
    }
  }
  return runs;
}

TrainingFigures ComputeTraining(const std::vector<TrainingRun>& runs, int64_t window_start_ms,
                                int64_t window_end_ms, double gpus) {
  TrainingFigures f;
  constexpr double kMsPerHour = 3600.0 * 1000.0;
  for (const TrainingRun& r : runs) {
    const int64_t end = r.end_ms == 0 ? window_end_ms : std::min(r.end_ms, window_end_ms);
    const int64_t start = std::max(r.start_ms, window_start_ms);
    if (end > start) f.gpu_hours += gpus * static_cast<double>(end - start) / kMsPerHour;
    const bool ended_within =
        r.end_ms != 0 && r.end_ms >= window_start_ms && r.end_ms <= window_end_ms;
    if (ended_within && r.terminated) {
      ++f.preemptions;
      const int64_t since = std::max({r.start_ms, r.last_checkpoint_ms, window_start_ms});
      if (r.end_ms > since) {
        f.lost_gpu_hours += gpus * static_cast<double>(r.end_ms - since) / kMsPerHour;
      }
    }
    if (ended_within && r.finished) ++f.jobs_finished;
  }
  return f;
}

}  // namespace arbiter::bench
