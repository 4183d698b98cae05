#pragma once
// The manifest's keys, declared once in the SDK's option vocabulary: type,
// default, doc, allowed values, bounds, and the keys of each section. The
// reader validates every manifest against these declarations with the code
// that validates plugin options, and a JSON Schema of the manifest can be
// generated from them. What JSON types cannot say (device syntax, folder
// names, units, node ranks, defaults taken from other keys) the declaration's
// doc or noun states and the reader checks.
#include <string>
#include <vector>

#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

// The top-level keys; each section holds its own keys as `fields`.
const sdk::OptionSpecs& manifest_schema();

// The formats output.save_model can name, each a file model.<format>; true
// means all of them.
const std::vector<std::string>& model_file_formats();

}  // namespace exogym::runtime::manifest
