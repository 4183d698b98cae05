#pragma once
// What the SDK's tests (test_sdk.cpp, test_options.cpp) share.
#include <nlohmann/json.hpp>

#include "exogym/sdk/error.h"
#include "testing.h"

namespace exogym::test {

// The ConfigError `fn` throws (fails the test if it throws nothing).
template <typename Fn>
sdk::ConfigError config_error(Fn&& fn) {
  try {
    fn();
  } catch (const sdk::ConfigError& error) {
    return error;
  }
  FAIL("expected a ConfigError");
  return sdk::ConfigError("", "");
}

// DiLoCo's outer optimizer as a strategy declares its default.
inline const nlohmann::json kDilocoOuter = {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.9}, {"nesterov", true}};

}  // namespace exogym::test
