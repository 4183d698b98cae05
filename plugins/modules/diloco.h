#pragma once
// DiLoCo's communication (Douillard et al. 2023): after every H local
// (inner) steps the nodes average their parameters, an outer optimizer steps
// a master copy of the parameters along the pseudo-gradient
// master - average, and every node continues from the new master. Each node
// keeps its own master and outer optimizer; they stay identical because
// every node steps them with the same average.
//
// Communicates: one all_reduce (Avg) of every trainable parameter after
// steps H-1, 2H-1, ... (0-based); nothing with one node (local training).
// Options: "H" and "outer_optimizer" (specs()).
// State: the master parameters ("<prefix>master.<i>") and the outer
// optimizer's state ("<prefix>outer.<i>.<field>", sdk::save_optimizer_state).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "exogym/sdk/compose.h"

namespace exogym::modules {

class DiLoCoModule final : public sdk::CommunicationModule {
 public:
  // Options "H" and "outer_optimizer".
  static sdk::OptionSpecs specs();
  // The default outer optimizer: Nesterov SGD, lr 0.7, momentum 0.9.
  static nlohmann::json default_outer_optimizer();

  // Reads "H" and "outer_optimizer" (merged over the default).
  explicit DiLoCoModule(const nlohmann::json& validated_options);
  DiLoCoModule(int64_t H, sdk::OptimizerSpec outer_optimizer);
  ~DiLoCoModule() override;

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;
  // A node that comes back receives the master copy and the outer
  // optimizer's state (load_state's keys) and restarts its inner steps from
  // the master, with a fresh inner optimizer.
  bool recovers_model() const override { return false; }
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in, const std::string& prefix) override;

  // This node's master parameters (the last outer step's result), in the
  // order of sdk::trainable_parameters().
  const std::vector<at::Tensor>& master() const { return master_; }

 private:
  int64_t H_;
  sdk::OptimizerSpec outer_spec_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> master_;
  std::unique_ptr<torch::optim::Optimizer> outer_;
};

}  // namespace exogym::modules
