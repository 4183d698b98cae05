#pragma once
// Include this instead of Catch2's header. LibTorch's glog defines CHECK
// too, and whichever header comes last wins: after glog's, a failing CHECK
// aborts the whole test binary instead of failing one test case. Including
// glog first (it has include guards) lets Catch's definitions win for good.
#include <c10/util/Logging.h>

#include <string>
#include <vector>

// Catch2 2 (one header) or Catch2 3 (<catch2/catch_all.hpp>, a library), as CMake
// found it (EXOGYM_CATCH2_MAJOR, tests/CMakeLists.txt: a machine may have the
// other one's headers too). The tests use Catch2 2's names for the string
// matchers and Approx; under Catch2 3 they are provided here.
#if EXOGYM_CATCH2_MAJOR == 3
#include <catch2/catch_all.hpp>
using Catch::Approx;
namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text,
                                                CaseSensitive sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, sensitivity);
}
using Matchers::EndsWith;
using Matchers::Matches;
using Matchers::Message;
using Matchers::StartsWith;
}  // namespace Catch
#elif EXOGYM_CATCH2_MAJOR == 2
#include <catch2/catch.hpp>
#else
#error "EXOGYM_CATCH2_MAJOR must be 2 or 3 (tests/CMakeLists.txt defines it)"
#endif

namespace exogym::testing {

// The names of every test case the binary holds.
inline std::vector<std::string> all_test_names() {
  std::vector<std::string> names;
  for (const auto& test : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
#if EXOGYM_CATCH2_MAJOR == 3
    names.push_back(test.getTestCaseInfo().name);
#else
    names.push_back(test.name);
#endif
  }
  return names;
}

}  // namespace exogym::testing
