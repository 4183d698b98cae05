#pragma once
// A character-level vocabulary: token id <-> Unicode character, plus an
// end-of-sequence token. Shared by the "text-char" dataset (encoding) and
// exogym-generate (decoding).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace exogym::runtime::data {

class CharVocabulary {
 public:
  // The reference's Shakespeare vocabulary: the 65 characters
  // " !$&',-.3:;?", A-Z, a-z and newline, in that order, then EOS (id 65).
  static CharVocabulary reference();

  // The distinct characters of `text` (UTF-8), sorted by code point as
  // nanoGPT's prepare.py does, then EOS. Throws sdk::DataError naming
  // `source` for text that is not valid UTF-8.
  static CharVocabulary from_text(const std::string& text, const std::string& source);

  // `characters` in id order (each at most once); EOS gets the next id.
  explicit CharVocabulary(std::u32string characters);

  // Characters plus EOS.
  int64_t size() const { return static_cast<int64_t>(characters_.size()) + 1; }
  int64_t eos() const { return static_cast<int64_t>(characters_.size()); }
  const std::u32string& characters() const { return characters_; }

  std::optional<int64_t> id(char32_t character) const;

  // UTF-8 text -> ids. Throws sdk::DataError naming `source`, the character,
  // its byte offset, line and column for a character outside the vocabulary
  // or invalid UTF-8. `hint` is appended to the out-of-vocabulary message.
  std::vector<int64_t> encode(const std::string& text, const std::string& source, const std::string& hint = "") const;

  // The text of one token: its character as UTF-8, "" for EOS. Throws
  // std::out_of_range for an id outside the vocabulary.
  std::string token_text(int64_t id) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::u32string characters_;
  std::array<int32_t, 128> ascii_;  // id of each ASCII character, -1 if none
  std::unordered_map<char32_t, int64_t> other_;
};

// One code point as UTF-8.
std::string utf8_encode(char32_t code_point);

// "'a' (U+0061)", "'\n' (U+000A)": a character for error messages.
std::string describe_character(char32_t code_point);

}  // namespace exogym::runtime::data
