#include "exogym/runtime/util/mean_std.h"

#include <algorithm>
#include <cmath>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::util {

MeanStd mean_std(const std::vector<double>& values) {
  EXOGYM_CHECK_INTERNAL(!values.empty(), "mean_std of no values");
  MeanStd out;
  if (values.size() < 2) {
    out.mean = values.front();
    out.std = NAN;
    return out;
  }
  if (std::all_of(values.begin(), values.end(), [&](double v) { return v == values.front(); })) {
    out.mean = values.front();
    return out;
  }
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - out.mean) * (v - out.mean);
  out.std = std::sqrt(squares / static_cast<double>(values.size() - 1));
  return out;
}

}  // namespace exogym::runtime::util
