#include "exogym/modules/async/async_rounds.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"

namespace exogym::modules {

sdk::OptionSpecs AsyncRounds::round_specs(int64_t default_H, bool default_dynamic) {
  return {
      // Within an int: H = INT64_MAX times a speed overflowed into a round
      // of no steps (an update every step), and 1e12 never sends.
      sdk::OptionSpec{"H",
                      sdk::OptionType::PositiveInteger,
                      default_H,
                      "inner steps per round of the fastest node; a node sends its update after its round's steps",
                      {},
                      false,
                      static_cast<uint64_t>(std::numeric_limits<int>::max())},
      sdk::OptionSpec{"dynamic_local_updates", sdk::OptionType::Boolean, default_dynamic,
                      "a node of relative speed s takes max(1, round(H·s)) steps per round, so that every round "
                      "takes about the same simulated time; false: H for every node"},
  };
}

AsyncRounds::AsyncRounds(const sdk::ModuleOptions& o)
    : H_(o.at("H").get<int64_t>()), dynamic_(o.at("dynamic_local_updates").get<bool>()) {}

void AsyncRounds::init(sdk::NodeContext& ctx, sdk::Model& model) {
  if (ctx.async == nullptr) {
    throw sdk::ConfigError("strategy", "this strategy is asynchronous, and this runtime has no asynchronous link");
  }
  params_.clear();
  for (auto& p : sdk::trainable_parameters(model)) params_.push_back(p.detach());
  base_ = clones(params_);
  const double speed = ctx.async->relative_speed();
  // A very fast node's round is capped where llround stays defined (and
  // past any run's steps).
  const double steps = std::min(static_cast<double>(H_) * speed, 0x1.0p62);
  round_steps_ = dynamic_ ? std::max<int64_t>(1, std::llround(steps)) : H_;
  taken_ = 0;
  ctx.async->connect(make_server(ctx, params_), [this](const sdk::AsyncReply& reply) { take(reply); });
}

void AsyncRounds::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t /*step*/) {
  if (++taken_ < round_steps_) return;
  taken_ = 0;
  at::NoGradGuard no_grad;
  ctx.async->send(update(params_, base_));
}

void AsyncRounds::take(const sdk::AsyncReply& reply) {
  if (reply.tensors.size() != params_.size()) {
    throw sdk::Error("the server replied with " + std::to_string(reply.tensors.size()) + " tensors for " +
                     std::to_string(params_.size()) + " parameters");
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].copy_(reply.tensors[i]);
    base_[i].copy_(reply.tensors[i]);
  }
  taken_ = 0;  // a new round (after a comeback, the donor's round is not this node's)
}

void AsyncRounds::save_state(sdk::StateDict& out, const std::string& prefix) const {
  out[prefix + "taken"] = at::scalar_tensor(taken_, at::kLong);
  sdk::save_tensors(out, prefix + "base.", base_);
}

void AsyncRounds::load_state(const sdk::StateDict& in, const std::string& prefix) {
  taken_ = sdk::state_tensor(in, prefix + "taken").item<int64_t>();
  sdk::load_tensors(in, prefix + "base.", base_);
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.clone());
  return out;
}

}  // namespace exogym::modules
