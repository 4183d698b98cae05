#include "exogym/runtime/data/registry.h"

#include "exogym/runtime/data/mnist.h"
#include "exogym/runtime/data/synthetic.h"
#include "exogym/runtime/data/tensors_dataset.h"
#include "exogym/runtime/data/text_char.h"
#include "exogym/runtime/data/tokens.h"

namespace exogym::runtime::data {

std::optional<sdk::OptionSpecs> builtin_dataset_options(const std::string& name) {
  if (name == "mnist") return sdk::OptionSpecs{};
  if (name == "synthetic") return SyntheticDataset::option_specs();
  if (name == "text-char") return TextCharDataset::option_specs();
  if (name == "tokens") return TokensDataset::option_specs();
  if (name == "tensors") return TensorsDataset::option_specs();
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
  if (name == "text-char") {
    return std::make_shared<const TextCharDataset>(request.path, request.split,
                                                   TextCharDataset::options_from_json(validated_options));
  }
  if (name == "tokens") {
    return std::make_shared<const TokensDataset>(request.path, request.split,
                                                 TokensDataset::options_from_json(validated_options));
  }
  if (name == "tensors") {
    return std::make_shared<const TensorsDataset>(request.path, request.split,
                                                  TensorsDataset::options_from_json(validated_options));
  }
  return nullptr;
}

std::vector<std::string> builtin_dataset_names() { return {"mnist", "synthetic", "tensors", "text-char", "tokens"}; }

}  // namespace exogym::runtime::data
