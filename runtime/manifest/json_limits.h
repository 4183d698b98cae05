#pragma once
// What a manifest's JSON text may hold, checked on the text before it is
// parsed: nesting deeper than any manifest needs (a hostile or corrupt file
// 60,000 levels deep overflowed the stack in recursive code downstream), and
// numbers beyond a double's range, which the JSON parser refuses without
// saying where.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace exogym::runtime::manifest {

inline constexpr int kMaxJsonDepth = 64;

struct JsonLimitViolation {
  size_t line = 0;    // 1-based, as an editor shows it
  size_t column = 0;  // 1-based
  std::string message;
};

// The first place where `text` breaks a limit, if any. Strings and comments
// (// and /* */, as the manifest reader allows) are skipped; anything else
// that is not valid JSON is left for the parser to report.
std::optional<JsonLimitViolation> find_json_limit_violation(std::string_view text);

}  // namespace exogym::runtime::manifest
