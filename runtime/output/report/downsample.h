#pragma once
// Fewer points for drawing a long series: per pixel column, the first
// point with the smallest value and the first with the largest, so that a
// spike stays visible however long the run.
#include <vector>

namespace exogym::runtime::output::report {

struct Point {
  double x = 0, y = 0;
};

// `x` non-decreasing (steps, a clock, cumulative bytes), `y` the values;
// points whose x or y is not finite are dropped. Columns split [x_min,
// x_max] evenly; a column keeps at most two points, in their original order,
// so a series with at most one point per column comes back whole.
std::vector<Point> downsample(const std::vector<double>& x, const std::vector<double>& y, double x_min, double x_max,
                              int columns);

}  // namespace exogym::runtime::output::report
