// Guards for the test suite itself.
#include <string>

#include "testing.h"

// ctest runs each case by name. catch_discover_tests cuts a name at ';' (a
// CMake list separator), and Catch reads '[' as the start of a tag, a
// leading "--" as an option and (Catch2 3) a leading '"' as a quote: such an
// entry runs no test at all.
TEST_CASE("every test name survives ctest's test list", "[sdk]") {
  const auto names = exogym::testing::all_test_names();
  REQUIRE(names.size() > 100);
  for (const auto& name : names) {
    INFO(name);
    CHECK(name.find(';') == std::string::npos);
    CHECK(name.find('[') == std::string::npos);
    CHECK(name.rfind("--", 0) != 0);
    CHECK(name.rfind('"', 0) != 0);
  }
}
