#pragma once
// Exporting a plugin: one macro per library, at global scope, e.g.
//   EXOGYM_MODEL_PLUGIN("mlp", "1.0.0", MlpModel, mlp_options)
// where MlpModel has a constructor taking `const nlohmann::json& options`
// (already validated against mlp_options(), defaults filled in) and
// mlp_options is a function returning exogym::sdk::OptionSpecs (options.h),
// called when the plugin is loaded. Likewise EXOGYM_STRATEGY_PLUGIN, and
// EXOGYM_DATASET_PLUGIN whose class constructor takes
// (const nlohmann::json& options, const exogym::sdk::DatasetRequest&);
// EXOGYM_NODE_DATASET_PLUGIN exports a dataset built once per node (the
// request's rank says which). A strategy made of communication modules has
// its own macro, EXOGYM_MODULE_STRATEGY_PLUGIN (compose.h).
//
// The loader refuses a library built for another ABI version or with
// another compiler or LibTorch before running any of its code:
// plugin_abi.h says what the macros put in the library, and when the ABI
// version changes.
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin_abi.h"
