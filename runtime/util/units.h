#pragma once
// Physical quantities written with units in the manifest ("1Gbit/s", "10ms")
// and their human-readable rendering in tables and logs.
#include <string>

namespace exogym::runtime::util {

// A data rate such as "1Gbit/s", "100 Mbit/s", "1.5GB/s" or "10Gbps", in
// bytes per second. Decimal prefixes (k = 1000), as network links are sold;
// "bit" units divide by 8. Throws sdk::ConfigError at `path` for anything
// else: no unit, a unit that is not a rate ("1 Gbit"), zero or negative,
// below 1 bit/s, or beyond a double's range.
double parse_bandwidth(const std::string& text, const std::string& path);

// A duration such as "10ms", "0.5 s", "250us", "2min" or "1h", in seconds.
// Zero is allowed ("0ms"); negative values, more than 1e12 s (about 31,700
// years: a simulated clock adds durations up and must stay finite), bare
// numbers and unknown units are ConfigErrors at `path`.
double parse_duration(const std::string& text, const std::string& path);

// A number of steps such as "500 steps" (or "1 step"), > 0 and possibly
// fractional (a mean). Anything else is a ConfigError at `path`.
double parse_steps(const std::string& text, const std::string& path);
// Whether `text` ends in a unit of steps ("500 steps"), as parse_steps wants.
bool counts_steps(const std::string& text);

// 1234567 -> "1.23 MB" (decimal prefixes, like parse_bandwidth).
std::string format_bytes(double bytes);

// 0.0123 -> "12.3ms", 42.1 -> "42.1s", 65 -> "1m05s", 5400 -> "1h30m";
// "?" for negative or non-finite values.
std::string format_duration(double seconds);

}  // namespace exogym::runtime::util
