#include "core/fairshare/fair_share.h"

#include <algorithm>
#include <cmath>

namespace arbiter::core {

double Share(const QuotaNode& n, const QuotaVec& usage, const QuotaVec* history,
             const QuotaVec& capacity, int num_dims) {
  const bool decay = history != nullptr && n.half_life_seconds > 0;
  double share = 0;
  for (int d = 0; d < num_dims; ++d) {
    const int64_t entitlement = n.guaranteed[d] > 0 ? n.guaranteed[d] : capacity[d];
    if (entitlement <= 0) continue;
    double u = static_cast<double>(usage[d]);
    if (decay) u = (u + static_cast<double>((*history)[d])) / 2.0;
    share = std::max(share, u / static_cast<double>(entitlement));
  }
  return share / n.weight;
}

QuotaVec DecayUsage(const QuotaVec& history, const QuotaVec& usage, DurationMs dt,
                    int64_t half_life_seconds, int num_dims) {
  if (half_life_seconds <= 0) return usage;
  const double a =
      std::exp2(-static_cast<double>(dt) / (1000.0 * static_cast<double>(half_life_seconds)));
  QuotaVec out;
  for (int d = 0; d < num_dims; ++d) {
    int64_t h = std::llround(a * static_cast<double>(history[d]) +
                             (1.0 - a) * static_cast<double>(usage[d]));
    // With intervals short against the half-life, (1 - a)(U - H) is under half a unit and would
    // round back to H forever: H would never reach U (nor decay to 0). Move one unit instead.
    if (dt > 0 && h == history[d] && usage[d] != history[d]) h += usage[d] > h ? 1 : -1;
    out[d] = h;
  }
  return out;
}

}  // namespace arbiter::core
