#pragma once
// SPARTA's communication: after a local step, a small random subset of every
// parameter's elements (a fraction p) is replaced by its mean over the nodes.
#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/modules/index_selector.h"
#include "exogym/sdk/compose.h"

namespace exogym::modules {

class SpartaModule final : public sdk::CommunicationModule {
 public:
  // Options "p" and "selector".
  static sdk::OptionSpecs specs();

  // Reads "p", "selector" and, when present, "sparta_interval".
  explicit SpartaModule(const nlohmann::json& validated_options);
  // Averages after steps t with t % interval == 0.
  SpartaModule(double p, std::string selector, int64_t interval = 1);

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;

  // How many times this node averaged (the selectors' call number).
  int64_t calls() const { return calls_; }

 private:
  double p_;
  std::string selector_name_;
  int64_t interval_;
  std::unique_ptr<IndexSelector> selector_;
  std::vector<at::Tensor> params_;
  int64_t calls_ = 0;
};

}  // namespace exogym::modules
