#include "exogym/runtime/data/registry.h"

#include "exogym/runtime/data/mnist.h"
#include "exogym/runtime/data/synthetic.h"

namespace exogym::runtime::data {

std::optional<sdk::OptionSpecs> builtin_dataset_options(const std::string& name) {
  if (name == "mnist") return sdk::OptionSpecs{};
  if (name == "synthetic") return SyntheticDataset::option_specs();
  return std::nullopt;
}

std::shared_ptr<const sdk::Dataset> make_builtin_dataset(const std::string& name,
                                                         const nlohmann::json& validated_options,
                                                         const sdk::DatasetRequest& request) {
  if (name == "mnist") return std::make_shared<const MnistDataset>(request.path, request.split);
  if (name == "synthetic") {
    return std::make_shared<const SyntheticDataset>(
        SyntheticDataset::options_from_json(validated_options, request.seed), request.split);
  }
  return nullptr;
}

std::vector<std::string> builtin_dataset_names() { return {"mnist", "synthetic"}; }

}  // namespace exogym::runtime::data
