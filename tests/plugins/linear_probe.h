#pragma once
// The network and options the probe model plugins share: one linear layer
// from `input_size` features to `num_classes` logits.
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "exogym/sdk/options.h"

namespace exogym::test {

inline exogym::sdk::OptionSpecs linear_probe_options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"input_size", OptionType::PositiveInteger, 32, ""},
          OptionSpec{"num_classes", OptionType::PositiveInteger, 4, ""}};
}

struct LinearProbe : torch::nn::Module {
  explicit LinearProbe(const nlohmann::json& options)
      : linear(register_module("linear", torch::nn::Linear(options.at("input_size").get<int64_t>(),
                                                           options.at("num_classes").get<int64_t>()))) {}
  torch::nn::Linear linear;
};

}  // namespace exogym::test
