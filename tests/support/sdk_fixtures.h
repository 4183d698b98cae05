#pragma once
// What the SDK's tests share.
#include <nlohmann/json.hpp>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/quantize.h"
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

// Every low-bit format.
inline const std::vector<sdk::QuantFormat> kEveryQuantFormat = {sdk::QuantFormat::Fp8E4M3, sdk::QuantFormat::Fp8E5M2,
                                                                sdk::QuantFormat::Fp4E2M1, sdk::QuantFormat::Int8,
                                                                sdk::QuantFormat::Int4,    sdk::QuantFormat::Int2};

}  // namespace exogym::test
