#include "exogym/runtime/util/duration_text.h"

#include <cstdio>

namespace exogym::runtime::util {

std::string seconds_text(std::chrono::milliseconds duration) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g s", static_cast<double>(duration.count()) / 1000.0);
  return buffer;
}

}  // namespace exogym::runtime::util
