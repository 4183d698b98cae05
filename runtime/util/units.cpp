#include "exogym/runtime/util/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::util {

namespace {

struct Unit {
  const char* name;
  double factor;  // to bytes/s or to seconds
};

const std::vector<Unit> kRateUnits = {
    {"bit/s", 1.0 / 8},   {"kbit/s", 1e3 / 8}, {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8},
    {"Tbit/s", 1e12 / 8}, {"bps", 1.0 / 8},    {"kbps", 1e3 / 8},   {"Mbps", 1e6 / 8},
    {"Gbps", 1e9 / 8},    {"Tbps", 1e12 / 8},  {"B/s", 1.0},        {"kB/s", 1e3},
    {"KB/s", 1e3},        {"MB/s", 1e6},       {"GB/s", 1e9},       {"TB/s", 1e12}};

const std::vector<Unit> kTimeUnits = {{"ns", 1e-9}, {"us", 1e-6},  {"µs", 1e-6}, {"ms", 1e-3},
                                      {"s", 1.0},   {"min", 60.0}, {"h", 3600.0}};

// Splits "1.5 Gbit/s" into 1.5 and "Gbit/s". Returns false when the text does
// not start with a number.
bool split_quantity(const std::string& text, double& number, std::string& unit) {
  const char* begin = text.c_str();
  char* end = nullptr;
  number = std::strtod(begin, &end);
  if (end == begin) return false;
  std::string rest(end);
  size_t first = rest.find_first_not_of(' ');
  unit = first == std::string::npos ? "" : rest.substr(first);
  while (!unit.empty() && unit.back() == ' ') unit.pop_back();
  return true;
}

std::string unit_list(const std::vector<Unit>& units) {
  std::string out;
  for (const auto& u : units) out += (out.empty() ? "" : ", ") + std::string(u.name);
  return out;
}

// The range a quantity must lie in, in bytes/s or seconds, with the bound
// in words for messages.
struct Range {
  double least, most;
  const char* least_text;
  const char* most_text;
};

double parse_quantity(const std::string& text, const std::string& path, const std::vector<Unit>& units,
                      const char* what, const char* example, bool allow_zero, const Range& range) {
  const std::string quoted = sdk::json_excerpt(text);
  const std::string bad = std::string("expected a ") + what + " such as \"" + example + "\", got " + quoted;
  double number = 0;
  std::string unit;
  if (!split_quantity(text, number, unit) || !std::isfinite(number)) throw sdk::ConfigError(path, bad);
  const Unit* found = nullptr;
  for (const auto& u : units) {
    if (unit == u.name) found = &u;
  }
  if (!found) {
    std::string message = bad;
    if (unit.empty()) {
      message += ": the unit is missing";
    } else if (&units == &kRateUnits && unit.find('/') == std::string::npos && unit.find("ps") == std::string::npos) {
      message += ": \"" + unit + "\" is an amount, not a rate; write it per second (e.g. \"" + unit + "/s\")";
    } else {
      message += ": unknown unit \"" + unit + "\"";
    }
    throw sdk::ConfigError(path, message + " (units: " + unit_list(units) + ")");
  }
  if (number < 0 || (!allow_zero && number == 0)) {
    throw sdk::ConfigError(
        path, std::string("expected a ") + (allow_zero ? "non-negative " : "positive ") + what + ", got " + quoted);
  }
  const double value = number * found->factor;
  // A simulated time adds these up, step after step: a latency of 1e308h
  // (infinite in seconds) or a bandwidth of 1e-308bit/s (a byte then takes
  // longer than a double can say) would make it infinite, and every time
  // and rate of the summary with it.
  if (value > 0 && value < range.least) {
    throw sdk::ConfigError(path,
                           std::string("expected a ") + what + " of at least " + range.least_text + ", got " + quoted);
  }
  if (!(value <= range.most))
    throw sdk::ConfigError(path,
                           std::string("expected a ") + what + " of at most " + range.most_text + ", got " + quoted);
  return value;
}

// 1 bit/s: no link is slower; bandwidths above it may be as large as a
// double holds (a transfer then takes no time).
const Range kBandwidthRange = {1.0 / 8, std::numeric_limits<double>::max(), "1 bit/s", "1.8e308 B/s"};
// 1e12 s, about 31,700 years: longer than any simulated run, short enough
// that a run's sum of them stays finite.
const Range kDurationRange = {0, 1e12, "0s", "1e12 s (about 31,700 years)"};

std::string with_prefix(double value, const std::vector<std::pair<double, const char*>>& scales) {
  char buffer[48];
  for (const auto& [scale, name] : scales) {
    if (std::fabs(value) >= scale) {
      const double scaled = value / scale;
      std::snprintf(buffer, sizeof buffer,
                    scaled >= 100  ? "%.0f %s"
                    : scaled >= 10 ? "%.1f %s"
                                   : "%.2f %s",
                    scaled, name);
      return buffer;
    }
  }
  std::snprintf(buffer, sizeof buffer, "%.0f %s", value, scales.back().second);
  return buffer;
}

}  // namespace

double parse_bandwidth(const std::string& text, const std::string& path) {
  return parse_quantity(text, path, kRateUnits, "bandwidth", "1Gbit/s", /*allow_zero=*/false, kBandwidthRange);
}

double parse_duration(const std::string& text, const std::string& path) {
  return parse_quantity(text, path, kTimeUnits, "duration", "10ms", /*allow_zero=*/true, kDurationRange);
}

bool counts_steps(const std::string& text) {
  double number = 0;
  std::string unit;
  return split_quantity(text, number, unit) && (unit == "steps" || unit == "step");
}

double parse_steps(const std::string& text, const std::string& path) {
  double number = 0;
  std::string unit;
  if (!split_quantity(text, number, unit) || !std::isfinite(number) || (unit != "steps" && unit != "step")) {
    throw sdk::ConfigError(path, "expected a number of steps such as \"500 steps\", got " + sdk::json_excerpt(text));
  }
  if (!(number > 0))
    throw sdk::ConfigError(path, "expected a positive number of steps, got " + sdk::json_excerpt(text));
  return number;
}

std::string format_bytes(double bytes) {
  if (std::isnan(bytes)) return "-";
  if (bytes == 0) return "0 B";
  return with_prefix(bytes, {{1e15, "PB"}, {1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}, {1.0, "B"}});
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  char buffer[48];
  const auto whole = static_cast<long long>(std::llround(seconds));
  if (seconds == 0) {
    return "0s";
  } else if (seconds < 1) {
    std::snprintf(buffer, sizeof buffer, "%.3gms", seconds * 1e3);
  } else if (seconds < 59.95) {
    std::snprintf(buffer, sizeof buffer, "%.1fs", seconds);
  } else if (whole < 3600) {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", whole / 60, whole % 60);
  } else if (whole < 100 * 3600) {
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", whole / 3600, (whole % 3600) / 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1fd", seconds / 86400);
  }
  return buffer;
}

}  // namespace exogym::runtime::util
