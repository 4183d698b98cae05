#include "exogym/runtime/output/report/smoothing.h"

#include <cmath>

namespace exogym::runtime::output::report {

std::vector<double> ema_smoothed(const std::vector<double>& y, double weight) {
  if (weight <= 0) return y;
  std::vector<double> out(y.size(), NAN);
  double last = 0, kept = 1;  // kept = weight^n
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) continue;
    last = weight * last + (1 - weight) * y[i];
    kept *= weight;
    out[i] = last / (1 - kept);
  }
  return out;
}

}  // namespace exogym::runtime::output::report
