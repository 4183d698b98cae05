#include "exogym/modules/outer/diloco.h"

#include <string>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"

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

void DiLoCoModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  ctx_ = &ctx;
  params_.clear();
  for (auto& p : sdk::trainable_parameters(model)) params_.push_back(p.detach());
  // Every node starts from the same parameters (the initial broadcast, or a
  // checkpoint whose masters load_state brings in), so the first node to
  // get here makes the master for all.
  outer_ = OuterMaster::in_process(ctx, "diloco", params_, outer_spec_);
}

void DiLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  // Sync after every H inner steps: steps H-1, 2H-1, ... (0-based). The
  // reference synced when t % H == 0 && t > 0, which made the first round
  // H+1 inner steps long.
  if ((step + 1) % H_ != 0) return;
  // As the reference: one node has nobody to average with, and DiLoCo with
  // K = 1 is plain local training.
  if (ctx.num_nodes == 1) return;
  // The average, once for the process: only the outer step reads it (every
  // node then continues from the master), so no node needs its own copy.
  const sdk::SharedTensors average = ctx.communicator().all_reduce_shared(params_, sdk::ReduceOp::Avg);
  outer_->step(step, *average, OuterMaster::Received::Average);
  // Once per outer step: how far the nodes moved together, and the step
  // taken on it.
  ctx.record("pseudo_grad_norm", outer_->pseudo_grad_norm());
  ctx.record("outer_lr", outer_->outer_lr());
  outer_->mix_into(params_, 0.0);
}

void DiLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const { outer_->save(out, prefix); }

void DiLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  auto it = in.find(prefix + "outer_step");
  if (it == in.end()) throw sdk::Error("DiLoCo state: missing " + prefix + "outer_step");
  outer_->load(in, prefix, it->second.item<int64_t>());
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
  outer_->load(in, prefix, (ctx_->step / H_) * H_ - 1);
  outer_->mix_into(params_, 0.0);
}

}  // namespace exogym::modules
