#pragma once
// The datasets built into the runtime, by manifest name ("mnist",
// "synthetic", "tensors", "text-char", "tokens"). Any other name is a dataset plugin (see the plugin loader).
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/sdk/dataset.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::data {

// The option specs of built-in dataset `name`, or nullopt when `name` is not
// built in. "mnist" takes no options (empty specs).
std::optional<sdk::OptionSpecs> builtin_dataset_options(const std::string& name);

// Builds built-in dataset `name` from options already validated against
// builtin_dataset_options(name), or returns nullptr when `name` is not built
// in. Throws sdk::DataError for unreadable data and sdk::ConfigError with an
// empty JSON path for a split the dataset does not have (the caller knows the
// path, e.g. "data.val.split", and rewraps it).
std::shared_ptr<const sdk::Dataset> make_builtin_dataset(const std::string& name,
                                                         const nlohmann::json& validated_options,
                                                         const sdk::DatasetRequest& request);

// Sorted names of the built-in datasets.
std::vector<std::string> builtin_dataset_names();

}  // namespace exogym::runtime::data
