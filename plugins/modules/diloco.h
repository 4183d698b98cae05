#pragma once
// DiLoCo's communication: after every H local (inner) steps the nodes average
// their parameters, and an outer optimizer steps a master copy of the
// parameters along the pseudo-gradient master - average.
#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "exogym/sdk/compose.h"

namespace exogym::modules {

class DiLoCoModule final : public sdk::CommunicationModule {
 public:
  // Options "H" and "outer_optimizer".
  static sdk::OptionSpecs specs();
  // The default outer optimizer: Nesterov SGD, lr 0.7, momentum 0.9.
  static nlohmann::json default_outer_optimizer();

  explicit DiLoCoModule(const nlohmann::json& validated_options);
  DiLoCoModule(int64_t H, sdk::OptimizerSpec outer_optimizer);
  ~DiLoCoModule() override;

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;

  // This node's master parameters (the last outer step's result).
  const std::vector<at::Tensor>& master() const { return master_; }

 private:
  int64_t H_;
  sdk::OptimizerSpec outer_spec_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> master_;
  std::unique_ptr<torch::optim::Optimizer> outer_;
};

}  // namespace exogym::modules
