#pragma once
// DiLoCo's communication (Douillard et al. 2023): after every H local
// (inner) steps the nodes average their parameters, an outer optimizer steps
// a master copy of the parameters along the pseudo-gradient
// master - average, and every node continues from the new master. The master
// and the outer optimizer are kept once per process (outer_master.h).
//
// Communicates: one all_reduce (Avg, as all_reduce_shared: the process reads
// the average once, for its outer step) of every trainable parameter after
// steps H-1, 2H-1, ... (0-based); nothing with one node (local training).
// Options: "H" and "outer_optimizer" (specs()).
// State: outer_master.h's, under the module's prefix: the master parameters
// ("<prefix>master.<i>"), the outer optimizer's state
// ("<prefix>outer.<i>.<field>") and the step of the last outer step
// ("<prefix>outer_step"; not in the recovery state, where it follows from
// the step).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "exogym/modules/outer/outer_master.h"
#include "exogym/sdk/compose.h"

namespace exogym::modules {

class DiLoCoModule final : public sdk::CommunicationModule {
 public:
  // "DiLoCoModule": options "H" and "outer_optimizer".
  static sdk::ModuleSpecs specs();
  // The default outer optimizer: Nesterov SGD, lr 0.7, momentum 0.9.
  static nlohmann::json default_outer_optimizer();

  // Reads "H" and "outer_optimizer" (merged over the default).
  explicit DiLoCoModule(const sdk::ModuleOptions& options);
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
  void recovery_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in, const std::string& prefix) override;

  // This node's master parameters (the last outer step's result), in the
  // order of sdk::trainable_parameters().
  // The nodes of a process share it (the same tensors).
  const std::vector<at::Tensor>& master() const { return outer_->master(); }

 private:
  int64_t H_;
  sdk::OptimizerSpec outer_spec_;
  const sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;      // this node's
  std::shared_ptr<OuterMaster> outer_;  // this process's
};

}  // namespace exogym::modules
