#pragma once
// Durations as messages show them to users.
#include <chrono>
#include <string>

namespace exogym::runtime::util {

// "20 s", "1.5 s", "0.02 s".
std::string seconds_text(std::chrono::milliseconds duration);

}  // namespace exogym::runtime::util
