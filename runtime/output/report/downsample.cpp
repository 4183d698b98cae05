#include "exogym/runtime/output/report/downsample.h"

#include <algorithm>
#include <cmath>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output::report {

std::vector<Point> downsample(const std::vector<double>& x, const std::vector<double>& y, double x_min, double x_max,
                              int columns) {
  EXOGYM_CHECK_INTERNAL(x.size() == y.size(), "x and y of a series differ in length");
  EXOGYM_CHECK_INTERNAL(columns > 0, "downsample needs at least one column");
  std::vector<Point> kept;
  const double width = x_max > x_min ? x_max - x_min : 1.0;
  long current = -1;
  size_t lo = 0, hi = 0;  // indices of the current column's min and max
  auto flush = [&] {
    if (current < 0) return;
    kept.push_back({x[std::min(lo, hi)], y[std::min(lo, hi)]});
    if (lo != hi) kept.push_back({x[std::max(lo, hi)], y[std::max(lo, hi)]});
  };
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
    const long column = std::clamp(static_cast<long>((x[i] - x_min) / width * columns), 0L, long{columns} - 1);
    if (column != current) {
      flush();
      current = column;
      lo = hi = i;
    } else {
      if (y[i] < y[lo]) lo = i;
      if (y[i] > y[hi]) hi = i;
    }
  }
  flush();
  return kept;
}

}  // namespace exogym::runtime::output::report
