#include "exogym/runtime/data/label_range.h"

namespace exogym::runtime::data {

std::optional<int64_t> model_num_classes(const nlohmann::json& model_options) {
  const auto found = model_options.find("num_classes");
  if (found == model_options.end() || !found->is_number_integer()) return std::nullopt;
  return found->get<int64_t>();
}

std::optional<std::string> label_out_of_range(const std::vector<int64_t>& labels, int64_t num_classes,
                                              const std::string& option_path) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= 0 && labels[i] < num_classes) continue;
    return "example " + std::to_string(i) + " has label " + std::to_string(labels[i]) + ", but " + option_path +
           " is " + std::to_string(num_classes) + ": labels run from 0 to " + std::to_string(num_classes - 1);
  }
  return std::nullopt;
}

}  // namespace exogym::runtime::data
