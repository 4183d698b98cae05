// The runtime's small shared helpers (runtime/util/), and the run folder's
// JSON numbers (output/json_numbers.h).
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/util/duration_text.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/runtime/util/hash.h"
#include "exogym/runtime/util/text_lines.h"
#include "exogym/runtime/util/units.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "testing.h"

using exogym::runtime::util::Fnv1a;

namespace {

uint64_t fnv1a(const std::string& text) {
  Fnv1a hash;
  hash.add(text);
  return hash.digest();
}

}  // namespace

TEST_CASE("Fnv1a gives the published FNV-1a 64-bit digests", "[util]") {
  // Test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv).
  REQUIRE(fnv1a("") == 0xcbf29ce484222325ULL);
  REQUIRE(fnv1a("a") == 0xaf63dc4c8601ec8cULL);
  REQUIRE(fnv1a("foobar") == 0x85944171f73967e8ULL);
  // Pieces hash as their concatenation.
  Fnv1a pieces;
  pieces.add("foo");
  pieces.add("bar");
  REQUIRE(pieces.digest() == fnv1a("foobar"));
}

TEST_CASE("Fnv1a hashes an integer as its bytes, least significant first", "[util]") {
  Fnv1a integer;
  integer.add_integer(0x0807060504030201LL);
  REQUIRE(integer.digest() == fnv1a(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8)));
  Fnv1a negative;
  negative.add_integer(-2);
  REQUIRE(negative.digest() == fnv1a(std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8)));
}

TEST_CASE("durations read in seconds", "[util]") {
  using std::chrono::milliseconds;
  REQUIRE(exogym::runtime::util::seconds_text(milliseconds(20000)) == "20 s");
  REQUIRE(exogym::runtime::util::seconds_text(milliseconds(1500)) == "1.5 s");
  REQUIRE(exogym::runtime::util::seconds_text(milliseconds(20)) == "0.02 s");
}

TEST_CASE("json errors lose the library's prefix, other messages are kept", "[util]") {
  using exogym::runtime::util::without_json_prefix;
  REQUIRE(without_json_prefix("[json.exception.type_error.302] type must be number, but is string") ==
          "type must be number, but is string");
  REQUIRE(without_json_prefix("[json.exception.out_of_range.403] key 'sequence' not found") ==
          "key 'sequence' not found");
  REQUIRE(without_json_prefix("run.csv: [not json] as is") == "run.csv: [not json] as is");
  REQUIRE(without_json_prefix("[json.exception.x") == "[json.exception.x");
}

namespace {

std::string config_message(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const exogym::sdk::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a simulated time's units stay where sums of them remain finite", "[util]") {
  using exogym::runtime::util::parse_bandwidth;
  using exogym::runtime::util::parse_duration;
  REQUIRE(parse_bandwidth("1bit/s", "b") == 0.125);
  REQUIRE(parse_duration("1e12s", "d") == 1e12);
  // 1e-308 bit/s is positive, but a byte would take longer than a double says.
  REQUIRE(config_message([] { parse_bandwidth("1e-308bit/s", "network.bandwidth"); }) ==
          "network.bandwidth: expected a bandwidth of at least 1 bit/s, got \"1e-308bit/s\"");
  REQUIRE(config_message([] { parse_bandwidth("0.5 bps", "b"); }) ==
          "b: expected a bandwidth of at least 1 bit/s, got \"0.5 bps\"");
  REQUIRE(config_message([] { parse_bandwidth("1e300TB/s", "b"); }) ==
          "b: expected a bandwidth of at most 1.8e308 B/s, got \"1e300TB/s\"");
  // 1e308 h is infinite in seconds; 1e13 s is finite, but past any run.
  REQUIRE(config_message([] { parse_duration("1e308h", "network.latency"); }) ==
          "network.latency: expected a duration of at most 1e12 s (about 31,700 years), got \"1e308h\"");
  REQUIRE(config_message([] { parse_duration("1e13s", "d"); }) ==
          "d: expected a duration of at most 1e12 s (about 31,700 years), got \"1e13s\"");
}

TEST_CASE("text lines come one by one, a long one stops the read where it passes the limit", "[util]") {
  exogym::test::TempDir dir("text-lines");
  {
    std::ofstream out(dir / "t.txt", std::ios::binary);
    out << "one\r\n\ntwo" << std::string(3, '\0') << "\nlast";
  }
  exogym::runtime::util::TextLines lines(dir / "t.txt", 8);
  std::string line;
  std::vector<std::string> got;
  while (lines.next(line)) got.push_back(line);
  REQUIRE(got == std::vector<std::string>{"one\r", "", std::string("two\0\0\0", 6), "last"});
  REQUIRE(lines.line_number() == 4);
  {
    // A "line" of 200 KB: refused after its first chunk, not held whole.
    std::ofstream out(dir / "long.txt", std::ios::binary);
    out << "short\n" << std::string(200000, 'x') << "\n";
  }
  exogym::runtime::util::TextLines long_lines(dir / "long.txt", 4096);
  REQUIRE(long_lines.next(line));
  try {
    long_lines.next(line);
    FAIL("no error");
  } catch (const exogym::sdk::DataError& e) {
    REQUIRE(std::string(e.what()) == (dir / "long.txt").string() + ":2: a line longer than 4096 bytes");
  }
  // Not a regular file: refused at once, by what it is.
  try {
    exogym::runtime::util::TextLines folder(dir.path(), 4096);
    FAIL("no error");
  } catch (const exogym::sdk::DataError& e) {
    REQUIRE(std::string(e.what()) == dir.path().string() + ": a folder, not a regular file");
  }
}

TEST_CASE("non-finite numbers in a run's JSON are written as strings and read back", "[util]") {
  using exogym::runtime::output::json_number;
  using exogym::runtime::output::with_finite_numbers;
  const double inf = std::numeric_limits<double>::infinity();
  const nlohmann::json doc = {{"time_s", inf}, {"nodes", {{{"t", -inf}}, {{"t", 1.5}}}}, {"loss", NAN}, {"n", 3}};
  const nlohmann::json written = with_finite_numbers(doc);
  REQUIRE(written.dump() == R"({"loss":"nan","n":3,"nodes":[{"t":"-inf"},{"t":1.5}],"time_s":"inf"})");
  REQUIRE(written.dump().find("null") == std::string::npos);
  REQUIRE(json_number(written["time_s"]) == inf);
  REQUIRE(json_number(written["nodes"][0]["t"]) == -inf);
  REQUIRE(std::isnan(json_number(written["loss"])));
  REQUIRE(json_number(written["n"]) == 3);
  REQUIRE_THROWS_AS(json_number(nlohmann::json("fast")), nlohmann::json::type_error);
}
