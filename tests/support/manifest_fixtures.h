#pragma once
// Fixtures of the manifest tests: a minimal valid manifest, parsing
// shortcuts, and the ConfigError a call raises.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/manifest/manifest.h"
#include "exogym/sdk/error.h"
#include "testing.h"

namespace exogym::test::manifest {

using nlohmann::json;
using runtime::manifest::Manifest;
using runtime::manifest::ManifestSet;

inline json minimal() {
  return json::parse(R"({
    "model": {"plugin": "mlp"},
    "strategy": {"plugin": "ddp"},
    "data": {"train": {"dataset": "mnist"}},
    "train": {"max_steps": 10}
  })");
}

inline const std::filesystem::path kBase = "/manifests";

inline ManifestSet parse(const json& doc, const std::vector<std::string>& overrides = {}) {
  return runtime::manifest::parse_manifest(doc, kBase, "minimal", overrides);
}

inline Manifest parse_one(const json& doc, const std::vector<std::string>& overrides = {}) {
  ManifestSet set = parse(doc, overrides);
  REQUIRE(set.runs.size() == 1);
  return set.runs.front();
}

struct Caught {
  std::string path;
  std::string what;
};

template <class Fn>
Caught config_error(Fn&& fn) {
  try {
    fn();
  } catch (const sdk::ConfigError& error) {
    return {error.path(), error.what()};
  }
  FAIL("expected a ConfigError");
  return {};
}

// The error parse() raises for `minimal()` with `patch` merged in.
inline Caught error_with(const json& patch, const std::vector<std::string>& overrides = {}) {
  json doc = minimal();
  doc.merge_patch(patch);
  return config_error([&] { parse(doc, overrides); });
}

}  // namespace exogym::test::manifest
