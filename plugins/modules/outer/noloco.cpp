#include "exogym/modules/outer/noloco.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <string>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/random.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

namespace {
// shared_generator stream of the pairings ("NOLOCO").
constexpr uint64_t kPairStream = 0x4E4F4C4F434FULL;

double checked_momentum(double momentum) {
  if (!(momentum >= 0 && momentum < 1)) {
    throw sdk::ConfigError("outer_momentum", "expected a number in [0, 1), got " + nlohmann::json(momentum).dump());
  }
  return momentum;
}
}  // namespace

sdk::ModuleSpecs NoLoCoModule::specs() {
  return {"NoLoCoModule",
          {
              OptionSpec{"H", OptionType::PositiveInteger, 50,
                         "inner steps per outer step: after the H-th, 2H-th, ... inner step each node exchanges "
                         "with one random partner and takes the outer step"},
              OptionSpec{"outer_lr", OptionType::PositiveNumber, 0.7,
                         "beta: the step along the pair's mean outer gradient (theta - phi)"},
              OptionSpec{"outer_momentum", OptionType::NonNegativeNumber, 0.9,
                         "alpha, in [0, 1): the outer momentum's decay"},
              OptionSpec{"gamma", OptionType::NonNegativeNumber, nullptr,
                         "the pull of each node's slow weights towards the pair's mean (null: outer_lr, as the "
                         "reference code)"},
          }};
}

NoLoCoModule::NoLoCoModule(const sdk::ModuleOptions& o)
    : NoLoCoModule(o.at("H").get<int64_t>(), o.at("outer_lr").get<double>(), o.at("outer_momentum").get<double>(),
                   o.at("gamma").is_null() ? std::nullopt : std::optional<double>(o.at("gamma").get<double>())) {}

NoLoCoModule::NoLoCoModule(int64_t H, double outer_lr, double outer_momentum, std::optional<double> gamma)
    : H_(H), outer_lr_(outer_lr), outer_momentum_(checked_momentum(outer_momentum)), gamma_(gamma.value_or(outer_lr)) {}

void NoLoCoModule::init(sdk::NodeContext& /*ctx*/, sdk::Model& model) {
  params_.clear();
  slow_.clear();
  momentum_.clear();
  for (auto& p : sdk::trainable_parameters(model)) {
    params_.push_back(p.detach());
    slow_.push_back(p.detach().clone());
    momentum_.push_back(at::zeros_like(p.detach()));
  }
}

int NoLoCoModule::partner(uint64_t run_seed, int64_t round, const std::vector<int>& live, int rank) {
  const int n = static_cast<int>(live.size());
  at::Tensor order = at::randperm(n, sdk::shared_generator(run_seed, kPairStream, static_cast<uint64_t>(round)),
                                  at::TensorOptions().dtype(at::kLong));
  auto positions = order.accessor<int64_t, 1>();
  for (int j = 0; j + 1 < n; j += 2) {
    const int a = live[positions[j]], b = live[positions[j + 1]];
    if (a == rank) return b;
    if (b == rank) return a;
  }
  return -1;
}

void NoLoCoModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  if ((step + 1) % H_ != 0) return;
  at::NoGradGuard no_grad;
  const int64_t round = (step + 1) / H_ - 1;
  const int peer = partner(ctx.seed, round, ctx.live_ranks(), ctx.rank);
  const size_t n = params_.size();
  // What the pair exchanges: phi, then delta = theta - phi.
  std::vector<at::Tensor> mine;
  mine.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) mine.push_back(slow_[i]);
  for (size_t i = 0; i < n; ++i) mine.push_back(params_[i] - slow_[i]);
  std::vector<at::Tensor> mean = mine;
  if (peer >= 0) {
    const std::vector<at::Tensor> theirs = ctx.communicator().exchange(peer, mine);
    // Rank order: the lower rank's first, so that both get the same bits.
    const bool first = ctx.rank < peer;
    for (size_t i = 0; i < 2 * n; ++i) mean[i] = (first ? mine[i] + theirs[i] : theirs[i] + mine[i]).div_(2.0);
  }
  ctx.record("noloco_peer", peer);
  for (size_t i = 0; i < n; ++i) {
    // m <- alpha m + beta mean(delta) + gamma (mean(phi) - phi)
    momentum_[i].mul_(outer_momentum_).add_(mean[n + i], outer_lr_).add_(mean[i] - slow_[i], gamma_);
    slow_[i].add_(momentum_[i]);
    params_[i].copy_(slow_[i]);
  }
}

void NoLoCoModule::save_state(sdk::StateDict& out, const std::string& prefix) const {
  sdk::save_tensors(out, prefix + "slow.", slow_);
  sdk::save_tensors(out, prefix + "momentum.", momentum_);
}

void NoLoCoModule::load_state(const sdk::StateDict& in, const std::string& prefix) {
  sdk::load_tensors(in, prefix + "slow.", slow_);
  sdk::load_tensors(in, prefix + "momentum.", momentum_);
}

}  // namespace exogym::modules
