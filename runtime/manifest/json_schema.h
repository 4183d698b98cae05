#pragma once
// The manifest as a JSON Schema (draft 7, which editors such as VS Code
// support fully), generated from the declarations the reader validates with
// (schema.h) and from the options each plugin declares: `exogym-run
// --schema`. Editors use it to complete keys and plugin options, show their
// documentation and flag misspelt keys and wrong types as exogym-run would.
// What JSON Schema cannot say (units, device syntax, a divisor of the batch
// size) is only documented; exogym-run still checks it.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

// A plugin, or a built-in dataset, whose options the schema describes.
struct PluginOptions {
  std::string kind;  // "model", "strategy" or "dataset"
  std::string name;  // as the manifest names it
  sdk::OptionSpecs options;
};

// The schema of one option, or of an object of `specs`. `partial`: every key
// optional and null allowed, as in a variant of "runs" (a patch, patch.h),
// except inside an object naming its kind, which is complete there too.
nlohmann::json option_json_schema(const sdk::OptionSpec& spec, bool partial);
nlohmann::json options_json_schema(const sdk::OptionSpecs& specs, bool partial);

// The whole manifest: its keys, "$schema", and for each plugin named in
// "model", "strategy" or a dataset, the options of that plugin; "runs" as a
// list of partial manifests.
nlohmann::json manifest_json_schema(const std::vector<PluginOptions>& plugins);

}  // namespace exogym::runtime::manifest
