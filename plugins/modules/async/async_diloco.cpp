#include "exogym/modules/async/async_diloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/shared.h"

namespace exogym::modules {

namespace {

using sdk::OptionSpec;
using sdk::OptionType;

// The server: the model, the momentum and the pseudo-gradients since the
// last momentum step.
class DelayedNesterovServer final : public sdk::AsyncServer {
 public:
  DelayedNesterovServer(const std::vector<at::Tensor>& params, double lr, double momentum, int64_t delay)
      : model_(clones(params)), lr_(lr), momentum_(momentum), delay_(delay) {
    for (const auto& p : model_) {
      momentum_buffer_.push_back(at::zeros_like(p));
      pending_.push_back(at::zeros_like(p));
    }
  }

  void receive(const std::vector<sdk::AsyncUpdate>& arrivals) override {
    at::NoGradGuard no_grad;
    for (const auto& update : arrivals) {
      if (update.tensors.size() != model_.size()) throw sdk::Error("async_diloco: an update of the wrong length");
      for (size_t i = 0; i < model_.size(); ++i) {
        model_[i].sub_(update.tensors[i], lr_ / static_cast<double>(delay_));
        pending_[i].add_(update.tensors[i]);
      }
      ++version_;
      if (version_ % delay_ != 0) continue;
      for (size_t i = 0; i < model_.size(); ++i) {
        momentum_buffer_[i].mul_(momentum_).add_(pending_[i], 1.0 / static_cast<double>(delay_));
        model_[i].sub_(momentum_buffer_[i], lr_ * momentum_);
        pending_[i].zero_();
      }
    }
  }
  std::vector<at::Tensor> reply(int /*rank*/) override { return clones(model_); }
  int64_t version() const override { return version_; }
  void save_state(sdk::StateDict& out) const override {
    sdk::save_tensors(out, "model.", model_);
    sdk::save_tensors(out, "momentum.", momentum_buffer_);
    sdk::save_tensors(out, "pending.", pending_);
    out["version"] = at::scalar_tensor(version_, at::kLong);
  }
  void load_state(const sdk::StateDict& in) override {
    sdk::load_tensors(in, "model.", model_);
    sdk::load_tensors(in, "momentum.", momentum_buffer_);
    sdk::load_tensors(in, "pending.", pending_);
    version_ = sdk::state_tensor(in, "version").item<int64_t>();
  }

 private:
  std::vector<at::Tensor> model_, momentum_buffer_, pending_;
  double lr_, momentum_;
  int64_t delay_, version_ = 0;
};

}  // namespace

sdk::ModuleSpecs AsyncDiLoCoModule::specs() {
  sdk::OptionSpecs specs = round_specs(100, true);
  specs.push_back(OptionSpec{"outer_lr", OptionType::PositiveNumber, 0.7, "the server's outer learning rate"});
  specs.push_back(OptionSpec{"outer_momentum", OptionType::NonNegativeNumber, 0.9,
                             "the server's Nesterov momentum, stepped every `delay` updates"});
  specs.push_back(OptionSpec{"delay", OptionType::PositiveInteger, nullptr,
                             "N of delayed Nesterov: updates between momentum steps (null: the number of nodes)"});
  return {"AsyncDiLoCoModule", specs};
}

AsyncDiLoCoModule::AsyncDiLoCoModule(const sdk::ModuleOptions& o)
    : AsyncRounds(o),
      lr_(o.at("outer_lr").get<double>()),
      momentum_(o.at("outer_momentum").get<double>()),
      delay_(o.at("delay").is_null() ? std::nullopt : std::optional<int64_t>(o.at("delay").get<int64_t>())) {}

std::shared_ptr<sdk::AsyncServer> AsyncDiLoCoModule::make_server(sdk::NodeContext& ctx,
                                                                 const std::vector<at::Tensor>& params) {
  const int64_t delay = delay_.value_or(ctx.num_nodes);
  return sdk::shared_in_process<DelayedNesterovServer>(ctx, "async_diloco.server", [&] {
    return std::make_shared<DelayedNesterovServer>(params, lr_, momentum_, delay);
  });
}

std::vector<at::Tensor> AsyncDiLoCoModule::update(const std::vector<at::Tensor>& params,
                                                  const std::vector<at::Tensor>& base) {
  std::vector<at::Tensor> pseudo_gradient;
  for (size_t i = 0; i < params.size(); ++i) pseudo_gradient.push_back(base[i] - params[i]);
  return pseudo_gradient;
}

}  // namespace exogym::modules
