// Fair share: which queue goes next.
//
// Within each parent, children are visited by weighted dominant-resource fairness:
//   share(n) = max over dimensions d of  u(n, d) / E(n, d),   divided by weight(n)
//   E(n, d)  = G(n, d) when n is guaranteed some of d, else the cluster's capacity of d
//   u(n, d)  = U(n, d)                                  without decayed history
//            = (U(n, d) + H(n, d)) / 2                   with a half-life configured
// where H is the usage rate averaged with exponential decay (see DecayUsage): a team that used a
// lot yesterday has a larger share today and yields, as in Slurm's fair-share factor.
#pragma once

#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter::core {

// share(n) as above. `history` may be null (no decay).
double Share(const QuotaNode& n, const QuotaVec& usage, const QuotaVec* history,
             const QuotaVec& capacity, int num_dims);

// Exponentially decayed usage rate over an interval of length dt during which usage was `usage`:
//   a = 2^(-dt / half_life);   H' = a H + (1 - a) usage
// A usage held constant forever gives H = usage; once it stops, H halves every half-life. H moves
// at least one unit toward the usage per call with dt > 0, so that short intervals cannot stall
// it in fixed point (below 0.5 / (1 - a) units from the usage it then moves faster than that).
QuotaVec DecayUsage(const QuotaVec& history, const QuotaVec& usage, DurationMs dt,
                    int64_t half_life_seconds, int num_dims);

}  // namespace arbiter::core
