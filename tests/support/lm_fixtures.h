#pragma once
// Shared by the language-modelling tests: the bundled Shakespeare text, a
// tiny character-model manifest, and small file and error helpers.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace exogym::test {

// examples/data/shakespeare/input.txt.
std::filesystem::path shakespeare();

// Writes `text` to `file` as it is (binary).
void write_text(const std::filesystem::path& file, const std::string& text);

// A tiny character model (nanogpt, one layer, block 16) on Shakespeare,
// trained by allreduce with AdamW: for runs that must be quick.
nlohmann::json text_manifest(int nodes, int64_t steps);

// The message of the exception f() throws, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace exogym::test
