#include "exogym/modules/diloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <mutex>
#include <string>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "exogym/sdk/shared.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

nlohmann::json DiLoCoModule::default_outer_optimizer() {
  return {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.9}, {"nesterov", true}};
}

sdk::ModuleSpecs DiLoCoModule::specs() {
  return {"DiLoCoModule",
          {
              OptionSpec{"H", OptionType::PositiveInteger, 100,
                         "inner steps per outer step: the nodes average and take an outer step after the H-th, "
                         "2H-th, ... inner step"},
              OptionSpec{"outer_optimizer", OptionType::Optimizer, default_outer_optimizer(),
                         "the outer optimizer, stepped on the master parameters with the pseudo-gradient "
                         "master - average; a partial object refines the default Nesterov SGD"},
          }};
}

DiLoCoModule::DiLoCoModule(const sdk::ModuleOptions& o)
    : DiLoCoModule(o.at("H").get<int64_t>(), sdk::OptimizerSpec::from_json(o.at("outer_optimizer"), "outer_optimizer",
                                                                           default_outer_optimizer())) {}

DiLoCoModule::DiLoCoModule(int64_t H, sdk::OptimizerSpec outer_optimizer)
    : H_(H), outer_spec_(std::move(outer_optimizer)) {}

DiLoCoModule::~DiLoCoModule() = default;

// One process's master and outer optimizer. `mutex` guards the outer step
// and loads; between them every node only reads the master (copies it into
// its parameters), and the next outer step waits for every live node's
// average, which each node joins only after its copy.
struct DiLoCoModule::Shared {
  std::mutex mutex;
  std::vector<at::Tensor> master;
  std::unique_ptr<torch::optim::Optimizer> outer;
  int64_t outer_step = -1;  // the step whose outer step the master holds
  // The master is still the parameters init() saw: right at a fresh start,
  // to be replaced when a resumed run loads its state.
  bool from_init = true;
  // The last outer step's metrics, which every node records.
  double pseudo_grad_norm = 0, outer_lr = 0;
};

const std::vector<at::Tensor>& DiLoCoModule::master() const { return shared_->master; }

void DiLoCoModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  ctx_ = &ctx;
  params_.clear();
  for (auto& p : sdk::trainable_parameters(model)) params_.push_back(p.detach());
  // Every node starts from the same parameters (the initial broadcast, or a
  // checkpoint whose masters load_state brings in), so the first node to
  // get here makes the master for all.
  shared_ = sdk::shared_in_process<Shared>(ctx, "diloco", [&] {
    auto shared = std::make_shared<Shared>();
    for (auto& p : params_) shared->master.push_back(p.clone().set_requires_grad(true));
    shared->outer = outer_spec_.build(shared->master);
    return shared;
  });
}

void DiLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  // Sync after every H inner steps: steps H-1, 2H-1, ... (0-based). The
  // reference synced when t % H == 0 && t > 0, which made the first round
  // H+1 inner steps long.
  if ((step + 1) % H_ != 0) return;
  // As the reference: one node has nobody to average with, and DiLoCo with
  // K = 1 is plain local training.
  if (ctx.num_nodes == 1) return;
  at::NoGradGuard no_grad;
  // The average, once for the process: only the outer step reads it (every
  // node then continues from the master), so no node needs its own copy.
  const sdk::SharedTensors average = ctx.communicator().all_reduce_shared(params_, sdk::ReduceOp::Avg);
  Shared& s = *shared_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.outer_step != step) {
      // The first node of the process here takes the outer step for all.
      double squared_norm = 0;
      for (size_t i = 0; i < s.master.size(); ++i) {
        // Pseudo-gradient: old global minus new average (the negative of
        // the average update), a fresh tensor each round.
        s.master[i].mutable_grad() = s.master[i].detach() - (*average)[i];
        squared_norm += s.master[i].grad().square().sum().item<double>();
      }
      s.pseudo_grad_norm = std::sqrt(squared_norm);
      s.outer_lr = sdk::get_lr(*s.outer);
      s.outer->step();
      // Not needed until the next round, which makes its own.
      for (auto& m : s.master) m.mutable_grad().reset();
      s.outer_step = step;
    }
  }
  // Once per outer step: how far the nodes moved together, and the step
  // taken on it (read only: the trained values do not depend on them).
  ctx.record("pseudo_grad_norm", s.pseudo_grad_norm);
  ctx.record("outer_lr", s.outer_lr);
  // A copy, never the master itself: the reference aliased the master's
  // storage on CPU (docs/differences.md#training-and-strategies), so later
  // inner steps moved the master and every later pseudo-gradient was 0.
  for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(s.master[i].detach());
}

void DiLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  const Shared& s = *shared_;
  for (size_t i = 0; i < s.master.size(); ++i) out[prefix + "master." + std::to_string(i)] = s.master[i].detach();
  sdk::save_optimizer_state(*s.outer, s.master, out, prefix + "outer.");
  out[prefix + "outer_step"] = at::full({}, s.outer_step, at::kLong);
}

void DiLoCoModule::load_shared(const sdk::StateDict& in, const std::string& prefix, int64_t outer_step) {
  auto at_key = [&](const std::string& key) -> const at::Tensor& {
    auto it = in.find(prefix + key);
    if (it == in.end()) throw sdk::Error("DiLoCo state: missing " + prefix + key);
    return it->second;
  };
  Shared& s = *shared_;
  std::lock_guard<std::mutex> lock(s.mutex);
  // As fresh already: every node that took part in the same outer steps
  // holds the same state, so the process loads it once.
  if (!s.from_init && outer_step <= s.outer_step) return;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < s.master.size(); ++i) s.master[i].detach().copy_(at_key("master." + std::to_string(i)));
  sdk::load_optimizer_state(*s.outer, s.master, in, prefix + "outer.");
  s.outer_step = outer_step;
  s.from_init = false;
}

void DiLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  auto it = in.find(prefix + "outer_step");
  if (it == in.end()) throw sdk::Error("DiLoCo state: missing " + prefix + "outer_step");
  load_shared(in, prefix, it->second.item<int64_t>());
}

void DiLoCoModule::recovery_state(sdk::StateDict& out, const std::string& prefix) const {
  // What a real cluster would send: the master and the outer state. The
  // step they stand at follows from the step the node comes back at.
  save_state(out, prefix);
  out.erase(prefix + "outer_step");
}

void DiLoCoModule::load_recovery_state(sdk::Model& /*model*/, const sdk::StateDict& in, const std::string& prefix) {
  // The donor is live, so its state is at the last outer step before this
  // one: the largest s < step with (s + 1) % H == 0, or -1.
  load_shared(in, prefix, (ctx_->step / H_) * H_ - 1);
  at::NoGradGuard no_grad;
  const Shared& s = *shared_;
  for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(s.master[i].detach());
}

}  // namespace exogym::modules
