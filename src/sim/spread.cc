#include "sim/spread.h"

#include <cmath>

namespace arbiter::sim {

double StudentT975(int df) {
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                      2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                      2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                      2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) df = 1;
  if (df <= 30) return kTable[df - 1];
  return 1.960 + (2.042 - 1.960) * 30.0 / df;
}

Spread Spread::Of(const std::vector<double>& values) {
  Spread s;
  s.n = static_cast<int>(values.size());
  if (s.n == 0) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / s.n;
  s.lo = s.hi = s.mean;
  if (s.n < 2) return s;
  double ss = 0;
  for (double v : values) ss += (v - s.mean) * (v - s.mean);
  s.sd = std::sqrt(ss / (s.n - 1));
  const double half = StudentT975(s.n - 1) * s.sd / std::sqrt(static_cast<double>(s.n));
  s.lo = s.mean - half;
  s.hi = s.mean + half;
  return s;
}

}  // namespace arbiter::sim
