// Strategy "fedprox": FedProx (Li et al. 2020, "Federated Optimization in
// Heterogeneous Networks"): FedAvg whose local objective gains a proximal
// term (mu / 2) ||w - w_t||^2, w_t being the model the round started from,
// so that a node's local steps cannot drift far from it on data unlike the
// others'. Its gradient mu (w - w_t) is added to every parameter's gradient
// before the local step (before clipping, as a term of the loss would be).
// With mu = 0 it is fedavg, bit for bit (tested).
//
// Partial work ("partial_work"), the paper's systems half: a round ends at
// the deadline the fastest live node needs for its H local steps, and a
// node at speed s computes the floor(H s / s_fastest) steps it finishes by
// then (at least one; the round waits for it), idling through the rest
// (Strategy::computes), and sends that γ-inexact work to the average
// instead of being waited for or dropped. Node speeds: compute.speed.
//
// Options: fedavg's ("H", "island_size", "aggregator", ...), "mu",
// "partial_work" and the local step's. State: the local optimizer's, and w_t
// ("anchor.<i>"), which a node that comes back after a failure receives from
// its donor with the parameters.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "exogym/modules/outer/fedavg.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/plugin.h"

namespace exogym::plugins {

using sdk::OptionSpec;
using sdk::OptionType;

static sdk::ModuleSpecs fedprox_specs() {
  return {"FedProx",
          {
              OptionSpec{"mu", OptionType::NonNegativeNumber, 0.01,
                         "weight of the proximal term (mu / 2) ||w - w_t||^2 added to each node's local objective, "
                         "w_t being the model its round started from (0: FedAvg)"},
              OptionSpec{"partial_work", OptionType::Boolean, false,
                         "a slower node sends the local steps it finished by the round's deadline, that of the "
                         "fastest live node's H steps (the paper's variable local work), instead of being waited for"},
          }};
}

class FedProxStrategy final : public sdk::Strategy {
 public:
  explicit FedProxStrategy(const nlohmann::json& options)
      : local_(sdk::LocalStepOptions::from_json(options)),
        fedavg_(sdk::ModuleOptions(options, modules::FedAvgModule::specs())),
        H_(options.at("H").get<int64_t>()),
        mu_(options.at("mu").get<double>()),
        partial_work_(options.at("partial_work").get<bool>()) {}

  static sdk::OptionSpecs specs() {
    return sdk::compose_specs({fedprox_specs(), modules::FedAvgModule::specs(), sdk::LocalStepOptions::specs()});
  }

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    model_ = &model;
    local_.init(ctx, model);
    fedavg_.init(ctx, model);
    params_ = local_.parameters();
    anchor_.clear();
    for (const auto& p : params_) anchor_.push_back(p.detach().clone());
  }

  bool computes() const override { return ctx_->step % H_ < local_steps(); }

  void zero_grad() override { local_.zero_grad(); }
  double lr() const override { return local_.lr(); }

  void step() override {
    // An idle node still takes part in the round's average.
    if (computes()) local_step();
    fedavg_.communicate(*ctx_, *model_, ctx_->step);
    // The round is over: its average is the next round's w_t.
    if ((ctx_->step + 1) % H_ == 0) {
      refresh_anchor();
      if (partial_work_) ctx_->record("local_steps", static_cast<double>(local_steps()));
    }
  }

  void save_state(sdk::StateDict& out) const override {
    local_.save_state(out, "local.");
    fedavg_.save_state(out, kFedAvg);
    save_anchor(out);
  }
  void load_state(const sdk::StateDict& in) override {
    local_.load_state(in, "local.");
    fedavg_.load_state(in, kFedAvg);
    load_anchor(in);
  }
  void recovery_state(sdk::Model& model, sdk::StateDict& out) const override {
    // The donor's parameters, local optimizer state and anchor: the node
    // continues the round as the donor does.
    sdk::save_model_tensors(model, out);
    local_.save_state(out, "local.");
    fedavg_.recovery_state(out, kFedAvg);
    save_anchor(out);
  }
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in) override {
    sdk::load_model_tensors(model, in);
    local_.load_state(in, "local.");
    fedavg_.load_recovery_state(model, in, kFedAvg);
    load_anchor(in);
  }

 private:
  // The FedAvg module's keys, where a composed strategy would put them.
  static constexpr const char* kFedAvg = "module0.";

  // The local steps this node takes in its round: H, or with partial work
  // the steps it finishes by the deadline, from this step's speeds (1e-9:
  // H s / s_fastest may round below a whole number).
  int64_t local_steps() const {
    if (!partial_work_) return H_;
    const double share = ctx_->speed / ctx_->fastest_speed;
    return std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(H_) * share + 1e-9)));
  }

  // The local step on the proximal objective.
  void local_step() {
    if (mu_ > 0) {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < params_.size(); ++i) {
        // A parameter without a gradient has no loss term this step; the
        // proximal term still pulls it (its gradient is mu (w - w_t) alone).
        at::Tensor& grad = params_[i].mutable_grad();
        const at::Tensor pull = (params_[i].detach() - anchor_[i]).mul_(mu_);
        if (grad.defined()) {
          grad.add_(pull);
        } else {
          grad = pull;
        }
      }
    }
    local_.step();
  }

  void refresh_anchor() {
    for (size_t i = 0; i < params_.size(); ++i) anchor_[i].copy_(params_[i].detach());
  }
  void save_anchor(sdk::StateDict& out) const { sdk::save_tensors(out, "anchor.", anchor_); }
  void load_anchor(const sdk::StateDict& in) { sdk::load_tensors(in, "anchor.", anchor_); }

  sdk::LocalStep local_;
  modules::FedAvgModule fedavg_;
  int64_t H_;
  double mu_;
  bool partial_work_;
  sdk::NodeContext* ctx_ = nullptr;
  sdk::Model* model_ = nullptr;
  std::vector<at::Tensor> params_, anchor_;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("fedprox", "1.0.0", exogym::plugins::FedProxStrategy, exogym::plugins::FedProxStrategy::specs)
