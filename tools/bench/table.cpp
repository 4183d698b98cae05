#include "bench/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace exogym::bench {

std::string fmt(double v, int digits) {
  if (std::isnan(v)) return "-";
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  auto print_row = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) std::cout << "  ";
      std::cout << (i == 0 ? row[i] + std::string(width[i] - row[i].size(), ' ')
                           : std::string(width[i] - row[i].size(), ' ') + row[i]);
    }
    std::cout << '\n';
  };
  print_row(header);
  size_t total = 0;
  for (auto w : width) total += w + 2;
  std::cout << std::string(total - 2, '-') << '\n';
  for (const auto& row : rows) print_row(row);
  std::cout << std::endl;
}

}  // namespace exogym::bench
