// The runtime's small shared helpers (runtime/util/).
#include <chrono>
#include <string>

#include "exogym/runtime/util/duration_text.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/runtime/util/hash.h"
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
