#include "exogym/modules/outer/overlapped_diloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "exogym/modules/outer/diloco.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

sdk::ModuleSpecs OverlappedDiLoCoModule::specs() {
  sdk::OptionSpecs specs = {
      OptionSpec{"H", OptionType::PositiveInteger, 100,
                 "inner steps per round: a node sends its outer gradient after the H-th, 2H-th, ... inner step and "
                 "uses the average one round later"},
      OptionSpec{"update",
                 OptionType::String,
                 "eager",
                 "the outer gradient a node steps along while the average is in flight: eager (the late average "
                 "with the node's own part replaced by its fresh outer gradient) or delayed (the late average)",
                 {"eager", "delayed"}},
  };
  for (auto& spec : DiLoCoModule::specs().specs) {
    if (spec.name == "outer_optimizer") specs.push_back(spec);
  }
  return {"OverlappedDiLoCoModule", std::move(specs)};
}

OverlappedDiLoCoModule::OverlappedDiLoCoModule(const sdk::ModuleOptions& o)
    : H_(o.at("H").get<int64_t>()),
      update_(o.at("update").get<std::string>() == "eager" ? Update::Eager : Update::Delayed),
      outer_spec_(sdk::OptimizerSpec::from_json(o.at("outer_optimizer"), "outer_optimizer",
                                                DiLoCoModule::default_outer_optimizer())) {}

OverlappedDiLoCoModule::~OverlappedDiLoCoModule() = default;

void OverlappedDiLoCoModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  ctx_ = &ctx;
  params_.clear();
  for (auto& p : sdk::trainable_parameters(model)) params_.push_back(p.detach());
  // Every node starts from the same parameters. The delayed update is the
  // same on every node, so the process keeps one master; the eager one is
  // each node's own.
  outer_ = update_ == Update::Delayed ? OuterMaster::in_process(ctx, "overlapped_diloco", params_, outer_spec_)
                                      : std::make_shared<OuterMaster>(params_, outer_spec_);
}

std::vector<at::Tensor> OverlappedDiLoCoModule::outer_gradient(const sdk::SharedTensors& late,
                                                               const std::vector<at::Tensor>& own) const {
  std::vector<at::Tensor> g;
  const double K = static_cast<double>(ctx_->num_nodes);
  for (size_t i = 0; i < own.size(); ++i) {
    if (update_ == Update::Delayed) {
      g.push_back(late ? (*late)[i] : at::zeros_like(own[i]));
      continue;
    }
    // D_{r-1} + (d_r - d_{r-1}) / K, with D_0 = d_0 = 0.
    at::Tensor fresh = own_.empty() ? own[i] : own[i] - own_[i];
    g.push_back(late ? (*late)[i] + fresh / K : fresh / K);
  }
  return g;
}

sdk::SharedTensors OverlappedDiLoCoModule::receive() {
  if (!in_flight_.valid()) return nullptr;
  return std::make_shared<const std::vector<at::Tensor>>(in_flight_.wait());
}

void OverlappedDiLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  // As DiLoCo: one node has nobody to average with.
  if (ctx.num_nodes == 1) return;
  at::NoGradGuard no_grad;
  if ((step + 1) % H_ == 0) {
    std::vector<at::Tensor> own;
    const auto& master = outer_->master();
    for (size_t i = 0; i < params_.size(); ++i) own.push_back(master[i].detach() - params_[i]);
    const sdk::SharedTensors late = receive();
    in_flight_ = ctx.communicator().all_reduce_async(own, sdk::ReduceOp::Avg);
    // Before the second round the delayed update has nothing to step along:
    // the first round's work enters the master with the second's.
    if (late || update_ == Update::Eager) {
      outer_->step(step, outer_gradient(late, own), OuterMaster::Received::PseudoGradient);
      ctx.record("pseudo_grad_norm", outer_->pseudo_grad_norm());
      ctx.record("outer_lr", outer_->outer_lr());
    }
    outer_->mix_into(params_, 0.0);
    if (update_ == Update::Eager) own_ = std::move(own);
  }
}

void OverlappedDiLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  outer_->save(out, prefix);
  for (size_t i = 0; i < own_.size(); ++i) out[prefix + "own." + std::to_string(i)] = own_[i];
  in_flight_.save(out, prefix + "pending.");
}

void OverlappedDiLoCoModule::load(const sdk::StateDict& in, const std::string& prefix, int64_t outer_step) {
  outer_->load(in, prefix, outer_step);
  own_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = in.find(prefix + "own." + std::to_string(i));
    if (it == in.end()) break;
    own_.push_back(it->second.to(params_[i].options()).clone());
  }
  if (update_ == Update::Eager && outer_step >= 0 && own_.size() != params_.size()) {
    throw sdk::Error("overlapped DiLoCo state: an outer step was taken but " + prefix + "own." +
                     std::to_string(own_.size()) + " is missing");
  }
  // A handle the node holds is dropped: at a resume it holds none, and a
  // node back after a failure lost its transfers with it (pending.h).
  sdk::Communicator& comm = ctx_->communicator();
  const c10::Device device = params_.front().device();
  in_flight_ = sdk::Pending::load(in, prefix + "pending.", comm, device);
}

void OverlappedDiLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  auto it = in.find(prefix + "outer_step");
  if (it == in.end()) throw sdk::Error("overlapped DiLoCo state: missing " + prefix + "outer_step");
  load(in, prefix, it->second.item<int64_t>());
}

void OverlappedDiLoCoModule::recovery_state(sdk::StateDict& out, const std::string& prefix) const {
  save_state(out, prefix);
  out.erase(prefix + "outer_step");
}

void OverlappedDiLoCoModule::load_recovery_state(sdk::Model& /*model*/, const sdk::StateDict& in,
                                                 const std::string& prefix) {
  // The donor is live, so its state stands at the last sync before this
  // step: the largest s < step with (s + 1) % H == 0, or -1. The delayed
  // update skips its first outer step, which the master's state shows.
  int64_t last = (ctx_->step / H_) * H_ - 1;
  if (update_ == Update::Delayed && last < 2 * H_ - 1) last = -1;
  load(in, prefix, last);
  outer_->mix_into(params_, 0.0);
}

}  // namespace exogym::modules
