#pragma once
// The benchmark's text output: fixed-width tables on standard output.
#include <string>
#include <vector>

namespace exogym::bench {

// `v` with `digits` decimals; NaN as "-".
std::string fmt(double v, int digits = 2);

// The first column left-aligned, the others right-aligned, a rule under the
// header and a blank line after the table.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace exogym::bench
