// The spread of a figure over seeds: mean and a 95% Student-t confidence interval of the mean.
#pragma once

#include <vector>

namespace arbiter::sim {

struct Spread {
  int n = 0;
  double mean = 0;
  double sd = 0;  // sample standard deviation (n - 1); 0 for n < 2
  double lo = 0;  // mean -/+ t(0.975, n - 1) x sd / sqrt(n); the mean itself for n < 2
  double hi = 0;
  static Spread Of(const std::vector<double>& values);
};

// The 0.975 quantile of Student's t with `df` >= 1 degrees of freedom (exact to 3 decimals up to
// 30, then interpolated in 1/df towards the normal's 1.960).
double StudentT975(int df);

}  // namespace arbiter::sim
