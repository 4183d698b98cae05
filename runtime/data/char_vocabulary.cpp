#include "exogym/runtime/data/char_vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace {

// The code point starting at text[pos], advancing pos past it; nullopt for
// bytes that are not valid UTF-8 (pos is then left unchanged).
std::optional<char32_t> next_code_point(const std::string& text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  size_t length;
  char32_t value;
  char32_t minimum;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return std::nullopt;
  }
  if (pos + length > text.size()) return std::nullopt;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return std::nullopt;
    value = (value << 6) | (byte(pos + i) & 0x3F);
  }
  // Overlong forms, surrogates and values past Unicode are not characters.
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return std::nullopt;
  pos += length;
  return value;
}

struct Position {
  size_t line = 1, column = 1;
};

// Line and column (1-based, in characters) of byte `offset`, for messages.
Position position_of(const std::string& text, size_t offset) {
  Position p;
  size_t pos = 0;
  while (pos < offset && pos < text.size()) {
    if (text[pos] == '\n') {
      ++p.line;
      p.column = 1;
      ++pos;
      continue;
    }
    if (!next_code_point(text, pos)) ++pos;
    ++p.column;
  }
  return p;
}

std::string where(const std::string& text, size_t offset) {
  const Position p = position_of(text, offset);
  return "at byte offset " + std::to_string(offset) + " (line " + std::to_string(p.line) + ", column " +
         std::to_string(p.column) + ")";
}

[[noreturn]] void invalid_utf8(const std::string& text, size_t offset, const std::string& source) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[offset]));
  throw sdk::DataError(source + ": invalid UTF-8 (byte " + hex + ") " + where(text, offset));
}

}  // namespace

std::string utf8_encode(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

std::string describe_character(char32_t c) {
  std::string shown;
  switch (c) {
    case '\n':
      shown = "\\n";
      break;
    case '\t':
      shown = "\\t";
      break;
    case '\r':
      shown = "\\r";
      break;
    default:
      shown = c < 0x20 || c == 0x7F ? "?" : utf8_encode(c);
  }
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
  return "'" + shown + "' (" + code + ")";
}

CharVocabulary CharVocabulary::reference() {
  std::u32string chars = U" !$&',-.3:;?";
  for (char32_t c = 'A'; c <= 'Z'; ++c) chars += c;
  for (char32_t c = 'a'; c <= 'z'; ++c) chars += c;
  chars += U'\n';
  return CharVocabulary(chars);
}

CharVocabulary CharVocabulary::from_text(const std::string& text, const std::string& source) {
  std::set<char32_t> seen;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    auto c = next_code_point(text, pos);
    if (!c) invalid_utf8(text, start, source);
    seen.insert(*c);
  }
  return CharVocabulary(std::u32string(seen.begin(), seen.end()));
}

CharVocabulary::CharVocabulary(std::u32string characters) : characters_(std::move(characters)) {
  ascii_.fill(-1);
  for (size_t i = 0; i < characters_.size(); ++i) {
    const char32_t c = characters_[i];
    const bool fresh = c < 128 ? ascii_[c] < 0 : other_.count(c) == 0;
    if (!fresh) throw std::invalid_argument("CharVocabulary: " + describe_character(c) + " is listed twice");
    if (c < 128) {
      ascii_[c] = static_cast<int32_t>(i);
    } else {
      other_[c] = static_cast<int64_t>(i);
    }
  }
}

std::optional<int64_t> CharVocabulary::id(char32_t c) const {
  if (c < 128) return ascii_[c] < 0 ? std::nullopt : std::optional<int64_t>(ascii_[c]);
  auto it = other_.find(c);
  return it == other_.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

std::vector<int64_t> CharVocabulary::encode(const std::string& text, const std::string& source,
                                            const std::string& hint) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const auto c = next_code_point(text, pos);
    if (!c) invalid_utf8(text, start, source);
    const auto token = id(*c);
    if (!token) {
      throw sdk::DataError(source + ": character " + describe_character(*c) + " " + where(text, start) +
                           " is not in the vocabulary (" + std::to_string(characters_.size()) + " characters)" +
                           (hint.empty() ? "" : "; " + hint));
    }
    ids.push_back(*token);
  }
  return ids;
}

std::string CharVocabulary::token_text(int64_t id) const {
  if (id == eos()) return "";
  if (id < 0 || id >= eos()) {
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(size()) + " tokens");
  }
  return utf8_encode(characters_[static_cast<size_t>(id)]);
}

std::string CharVocabulary::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (const int64_t id : ids) out += token_text(id);
  return out;
}

}  // namespace exogym::runtime::data
