#include "exogym/runtime/manifest/json_limits.h"

#include <cmath>
#include <cstdlib>

namespace exogym::runtime::manifest {

namespace {

bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// Walks the text, keeping the line and column of the current character.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::optional<JsonLimitViolation> run() {
    int depth = 0;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '"') {
        skip_string();
      } else if (c == '/' && next() == '/') {
        while (i_ < text_.size() && text_[i_] != '\n') advance();
      } else if (c == '/' && next() == '*') {
        advance();
        advance();
        while (i_ < text_.size() && !(text_[i_] == '*' && next() == '/')) advance();
        advance();
        advance();
      } else if (c == '{' || c == '[') {
        if (++depth > kMaxJsonDepth) {
          return here("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels of objects and arrays");
        }
        advance();
      } else if (c == '}' || c == ']') {
        --depth;
        advance();
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (auto violation = check_number()) return violation;
      } else {
        advance();
      }
    }
    return std::nullopt;
  }

 private:
  char next() const { return i_ + 1 < text_.size() ? text_[i_ + 1] : '\0'; }
  void advance() {
    if (i_ >= text_.size()) return;
    if (text_[i_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++i_;
  }
  JsonLimitViolation here(std::string message) const { return {line_, column_, std::move(message)}; }

  void skip_string() {
    advance();
    while (i_ < text_.size() && text_[i_] != '"' && text_[i_] != '\n') {
      if (text_[i_] == '\\') advance();
      advance();
    }
    advance();
  }

  std::optional<JsonLimitViolation> check_number() {
    const JsonLimitViolation start = here("");
    const size_t begin = i_;
    while (i_ < text_.size() && is_number_char(text_[i_])) advance();
    const std::string token(text_.substr(begin, i_ - begin));
    const double value = std::strtod(token.c_str(), nullptr);
    if (std::isfinite(value)) return std::nullopt;
    return JsonLimitViolation{start.line, start.column,
                              "the number " + token + " is beyond the range of a double (about 1.8e308)"};
  }

  std::string_view text_;
  size_t i_ = 0;
  size_t line_ = 1;
  size_t column_ = 1;
};

}  // namespace

std::optional<JsonLimitViolation> find_json_limit_violation(std::string_view text) { return Scanner(text).run(); }

}  // namespace exogym::runtime::manifest
