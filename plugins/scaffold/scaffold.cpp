// Strategy "scaffold": SCAFFOLD (Karimireddy et al. 2020, "SCAFFOLD:
// Stochastic Controlled Averaging for Federated Learning"), option II.
// FedAvg's clients drift towards their own optimum when their data differ;
// SCAFFOLD corrects each local gradient by the drift it estimates, the
// server's control variate c minus the client's own c_i:
//   local step   y <- y - lr (g(y) - c_i + c)
//   round's end  c_i+ = c_i - c + (x - y) / sum(lr)      (sum over the round)
//                x <- x + server_lr * mean over the round's clients of (y - x)
//                c <- c + sum over them of (c_i+ - c_i) / N
// where x is the model the round started from and N the clients there are
// (NodeContext::clients: the nodes, or participation.clients). Each round
// sends both differences: twice FedAvg's bytes. c stays the mean of every
// client's c_i (those not trained yet count as zero), the property the
// tests check.
//
// c_i is the client's own (Strategy::has_client_state): with participation the
// runtime keeps it between the client's rounds, and a node that comes back
// from a failure starts from none. The local step is plain SGD: option II
// estimates c_i from it.
//
// Options: "H", "server_lr" and the local step's. State: x ("master.<i>"),
// c ("server_c.<i>"), c_i ("client_c.<i>") and the round's sum of learning
// rates ("lr_sum"); a node that comes back receives x and c.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/state_dict.h"

namespace exogym::plugins {

using sdk::OptionSpec;
using sdk::OptionType;

static sdk::ModuleSpecs scaffold_specs() {
  return {"SCAFFOLD",
          {
              OptionSpec{"H", OptionType::PositiveInteger, 10,
                         "local steps per round: the model is averaged and the control variates updated after "
                         "every H steps"},
              OptionSpec{"server_lr", OptionType::PositiveNumber, 1.0,
                         "the global step size: x moves by server_lr times the mean of the clients' y - x"},
          }};
}

// The local step's options, with plain SGD as the default optimizer.
static sdk::ModuleSpecs local_specs() {
  sdk::ModuleSpecs local = sdk::LocalStepOptions::specs();
  for (auto& spec : local.specs) {
    if (spec.name == "optimizer") spec.default_value = {{"name", "sgd"}, {"lr", 0.05}};
  }
  return local;
}

class ScaffoldStrategy final : public sdk::Strategy {
 public:
  explicit ScaffoldStrategy(const nlohmann::json& options)
      : local_(sdk::LocalStepOptions::from_json(options)),
        H_(options.at("H").get<int64_t>()),
        server_lr_(options.at("server_lr").get<double>()) {
    const sdk::OptimizerSpec optimizer = sdk::LocalStepOptions::from_json(options).optimizer;
    const nlohmann::json& p = optimizer.params;
    if (optimizer.name != "sgd" || p.value("momentum", 0.0) != 0.0 || p.value("weight_decay", 0.0) != 0.0) {
      throw sdk::ConfigError("optimizer",
                             "SCAFFOLD's local step is plain SGD (its control variates are estimated from the SGD "
                             "steps of a round): use {\"name\": \"sgd\", \"lr\": ...} without momentum or weight "
                             "decay, got " +
                                 optimizer.to_json().dump());
    }
  }

  static sdk::OptionSpecs specs() { return sdk::compose_specs({scaffold_specs(), local_specs()}); }

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    local_.init(ctx, model);
    params_ = local_.parameters();
    master_.clear();
    server_c_.clear();
    client_c_.clear();
    correction_.clear();
    for (const auto& p : params_) {
      master_.push_back(p.detach().clone());
      server_c_.push_back(at::zeros_like(p.detach()));
      client_c_.push_back(at::zeros_like(p.detach()));
      correction_.push_back(at::zeros_like(p.detach()));
    }
    lr_sum_ = 0;
  }

  void zero_grad() override { local_.zero_grad(); }
  double lr() const override { return local_.lr(); }

  void step() override {
    {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < params_.size(); ++i) {
        // A parameter without a gradient this step is still corrected.
        at::Tensor& grad = params_[i].mutable_grad();
        if (grad.defined()) {
          grad.add_(correction_[i]);
        } else {
          grad = correction_[i].clone();
        }
      }
    }
    local_.step();
    lr_sum_ += lr();
    if ((ctx_->step + 1) % H_ == 0) end_round();
  }

  void save_state(sdk::StateDict& out) const override {
    local_.save_state(out, "local.");
    sdk::save_tensors(out, "master.", master_);
    sdk::save_tensors(out, "server_c.", server_c_);
    sdk::save_tensors(out, "client_c.", client_c_);
    out["lr_sum"] = at::scalar_tensor(lr_sum_, at::kDouble);
  }
  void load_state(const sdk::StateDict& in) override {
    local_.load_state(in, "local.");
    sdk::load_tensors(in, "master.", master_);
    sdk::load_tensors(in, "server_c.", server_c_);
    sdk::load_tensors(in, "client_c.", client_c_);
    lr_sum_ = sdk::state_tensor(in, "lr_sum").item<double>();
    update_correction();
  }
  // A node that comes back receives x, c and the model's buffers, and
  // starts a round of its own from x: the steps it takes until the round
  // ends make its y - x, and lr_sum their learning rates (plain SGD has no
  // state to send). c_i is not the donor's to give: none, or the client's
  // (load_client_state).
  void recovery_state(sdk::Model& model, sdk::StateDict& out) const override {
    sdk::save_model_tensors(model, out, /*parameters=*/false);
    sdk::save_tensors(out, "master.", master_);
    sdk::save_tensors(out, "server_c.", server_c_);
  }
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in) override {
    at::NoGradGuard no_grad;
    sdk::load_model_tensors(model, in, /*parameters=*/false);
    sdk::load_tensors(in, "master.", master_);
    sdk::load_tensors(in, "server_c.", server_c_);
    for (size_t i = 0; i < params_.size(); ++i) params_[i].detach().copy_(master_[i]);
    for (auto& c : client_c_) c.zero_();
    lr_sum_ = 0;
    update_correction();
  }

  bool has_client_state() const override { return true; }
  void save_client_state(sdk::StateDict& out) const override { sdk::save_tensors(out, "control_variate.", client_c_); }
  void load_client_state(const sdk::StateDict& in) override {
    if (in.empty()) {
      for (auto& c : client_c_) c.zero_();
    } else {
      sdk::load_tensors(in, "control_variate.", client_c_);
    }
    update_correction();
  }

 private:
  void end_round() {
    at::NoGradGuard no_grad;
    const size_t n = params_.size();
    // [y - x for each parameter, then c_i+ - c_i for each]: one all-reduce.
    std::vector<at::Tensor> sums;
    std::vector<at::Tensor> next_c(n);
    for (size_t i = 0; i < n; ++i) sums.push_back(params_[i].detach() - master_[i]);
    for (size_t i = 0; i < n; ++i) {
      // A round at learning rate 0 (the end of a linear schedule) moved
      // nothing and tells nothing new about the client: c_i stays.
      next_c[i] = lr_sum_ > 0 ? client_c_[i] - server_c_[i] - sums[i] / lr_sum_ : client_c_[i].clone();
      sums.push_back(next_c[i] - client_c_[i]);
    }
    ctx_->communicator().all_reduce(sums, sdk::ReduceOp::Sum);
    const double clients = ctx_->live_count();
    double c_sq = 0, ci_sq = 0;
    for (size_t i = 0; i < n; ++i) {
      master_[i].add_(sums[i], server_lr_ / clients);
      server_c_[i].add_(sums[n + i], 1.0 / ctx_->clients);
      client_c_[i].copy_(next_c[i]);
      correction_[i] = server_c_[i] - client_c_[i];
      params_[i].detach().copy_(master_[i]);
      c_sq += server_c_[i].square().sum().item<double>();
      ci_sq += client_c_[i].square().sum().item<double>();
    }
    lr_sum_ = 0;
    ctx_->record("server_control_norm", std::sqrt(c_sq));
    ctx_->record("client_control_norm", std::sqrt(ci_sq));
  }

  // c - c_i, fixed within a round: what every local gradient gains.
  void update_correction() {
    for (size_t i = 0; i < params_.size(); ++i) correction_[i] = server_c_[i] - client_c_[i];
  }

  sdk::LocalStep local_;
  int64_t H_;
  double server_lr_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_, master_, server_c_, client_c_, correction_;
  double lr_sum_ = 0;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("scaffold", "1.0.0", exogym::plugins::ScaffoldStrategy, exogym::plugins::ScaffoldStrategy::specs)
