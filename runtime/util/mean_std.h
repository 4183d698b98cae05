#pragma once
// The mean and sample standard deviation of a run's numbers over seeds:
// shared by the comparison table and the report, so that both say the same.
#include <vector>

namespace exogym::runtime::util {

struct MeanStd {
  double mean = 0;
  double std = 0;  // sample standard deviation (n - 1); NaN for fewer than two values
};

// Of `values` (not empty). Equal values give exactly that value and 0, not a
// rounding residue.
MeanStd mean_std(const std::vector<double>& values);

}  // namespace exogym::runtime::util
