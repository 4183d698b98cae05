// A seeded mutation fuzzer over the manifest reader and --set: every example
// manifest, mutated thousands of ways (bytes flipped, inserted, deleted,
// duplicated; deep nesting; huge numbers; odd overrides), must either read
// or be refused with a ConfigError (exit status 2) carrying a message: no
// other exception, no crash, no hang. Seeded, so a failure repeats; bounded,
// so it runs in every ctest (CI included).
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

namespace fs = std::filesystem;

namespace {

constexpr int kMutantsPerExample = 400;
constexpr int kOverrides = 1500;

const char* const kPieces[] = {"{",
                               "}",
                               "[",
                               "]",
                               "\"",
                               ",",
                               ":",
                               "0",
                               "-1",
                               "1e400",
                               "-1e999",
                               "1e308",
                               "null",
                               "true",
                               "\"x\"",
                               "//",
                               "/*",
                               "*/",
                               "\\",
                               "\\u0000",
                               "\xff",
                               "nan",
                               "{}",
                               "[]",
                               "\"runs\": [",
                               "[[[[[[[[",
                               "9223372036854775808",
                               "0.0000001",
                               "\"nodes\": 100000000",
                               "\n"};

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string mutate_text(std::string text, std::mt19937& random) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : std::uniform_int_distribution<size_t>(0, n - 1)(random); };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = pick(text.size() + 1);
    switch (pick(6)) {
      case 0:  // flip a byte
        if (!text.empty()) text[pick(text.size())] ^= static_cast<char>(1 << pick(8));
        break;
      case 1:  // insert a piece of JSON syntax
        text.insert(at, kPieces[pick(std::size(kPieces))]);
        break;
      case 2:  // delete a range
        text.erase(at, pick(32));
        break;
      case 3: {  // duplicate a range
        const std::string part = text.substr(at, pick(64));
        text.insert(pick(text.size() + 1), part);
        break;
      }
      case 4:  // nest deeply
        text.insert(at, std::string(pick(200), pick(2) ? '[' : '{'));
        break;
      default:  // truncate
        text.resize(at);
        break;
    }
  }
  return text;
}

// Runs `read`; fails the test unless it returns or throws a ConfigError with a message.
template <class Read>
void expect_read_or_refused(Read read, const std::string& input) {
  try {
    read();
  } catch (const exogym::sdk::ConfigError& e) {
    if (std::string(e.what()).empty()) FAIL("an empty error message for: " << input);
  } catch (const std::exception& e) {
    FAIL("not a ConfigError (" << e.what() << ") for: " << input);
  } catch (...) {
    FAIL("a non-standard exception for: " << input);
  }
}

}  // namespace

TEST_CASE("fuzz: mutated manifests are read or refused with a ConfigError, never anything else", "[manifest]") {
  exogym::test::TempDir dir("manifest-fuzz");
  std::mt19937 random(20);
  int refused = 0, mutants = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(EXOGYM_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".json") continue;
    const std::string original = read_file(entry.path());
    for (int i = 0; i < kMutantsPerExample; ++i, ++mutants) {
      const std::string text = mutate_text(original, random);
      const fs::path file = dir / "m.json";
      std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
      bool ok = true;
      expect_read_or_refused(
          [&] {
            try {
              exogym::runtime::manifest::load_manifest(file);
            } catch (const exogym::sdk::ConfigError&) {
              ok = false;
              throw;
            }
          },
          text);
      refused += ok ? 0 : 1;
    }
  }
  CHECK(mutants >= 6 * kMutantsPerExample);
  CHECK(refused > mutants / 2);  // the mutations do reach the error paths
}

TEST_CASE("fuzz: odd --set overrides are applied or refused with a ConfigError", "[manifest]") {
  const fs::path example = fs::path(EXOGYM_SOURCE_DIR) / "examples" / "mnist-ddp.json";
  const std::vector<std::string> keys = {"nodes",
                                         "train.max_steps",
                                         "strategy.options.H",
                                         "a..b",
                                         ".",
                                         "runs",
                                         "model",
                                         "data.train.path",
                                         "x.y.z",
                                         "seed",
                                         "",
                                         "name"};
  std::mt19937 random(21);
  for (int i = 0; i < kOverrides; ++i) {
    std::string value = kPieces[random() % std::size(kPieces)];
    if (random() % 2) value += kPieces[random() % std::size(kPieces)];
    const std::string assignment = keys[random() % keys.size()] + (random() % 8 ? "=" : "") + value;
    expect_read_or_refused([&] { exogym::runtime::manifest::load_manifest(example, {assignment}); }, assignment);
  }
}
