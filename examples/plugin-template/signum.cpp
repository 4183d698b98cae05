// Signum with majority vote: every node sends the sign of its gradient; the
// step follows the sign of the sum (the majority). A complete strategy plugin.
#include <ATen/ATen.h>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

class Signum final : public exogym::sdk::Strategy {
 public:
  explicit Signum(const nlohmann::json& options) : lr_(options.at("lr").get<double>()) {}

  void init(exogym::sdk::NodeContext& ctx, exogym::sdk::Model& model) override {
    ctx_ = &ctx;
    params_ = model.network().parameters();
  }

  void zero_grad() override {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }

  void step() override {
    std::vector<at::Tensor> signs;
    for (auto& p : params_) signs.push_back(p.grad().defined() ? p.grad().sign() : at::zeros_like(p));
    ctx_->communicator().all_reduce(signs, exogym::sdk::ReduceOp::Sum);  // rank-ordered, deterministic
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].sub_(signs[i].sign() * lr_);
  }

  double lr() const override { return lr_; }

 private:
  double lr_;
  exogym::sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
};

static exogym::sdk::OptionSpecs signum_options() {
  return {{"lr", exogym::sdk::OptionType::PositiveNumber, 1e-3, "step size"}};
}

EXOGYM_STRATEGY_PLUGIN("signum", "1.0.0", Signum, signum_options)
