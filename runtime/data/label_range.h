#pragma once
// Labels the model cannot predict: a label ≥ the model's num_classes (or
// below 0) would otherwise be found only when a node draws it, deep in a
// step, as LibTorch's "Target 200 is out of bounds".
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace exogym::runtime::data {

// The model's "num_classes" option when it has one (an integer); nullopt
// for models without classes (language models, regression).
std::optional<int64_t> model_num_classes(const nlohmann::json& model_options);

// The first label outside [0, num_classes), as a sentence naming the
// example and the option ("example 12 has label 200, but ..."); nullopt
// when every label is inside.
std::optional<std::string> label_out_of_range(const std::vector<int64_t>& labels, int64_t num_classes,
                                              const std::string& option_path);

}  // namespace exogym::runtime::data
