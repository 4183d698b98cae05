// D-PSGD (Lian et al., 2017): no all-reduce. After each local SGD step every
// node exchanges its parameters with its two neighbours on a ring of the
// live nodes and takes the mean of the three. A peer-to-peer strategy plugin,
// using the deadlock-free order docs/plugins.md gives for a ring: nodes at
// even positions exchange right, then left; nodes at odd positions left,
// then right.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace sdk = exogym::sdk;

class RingGossip final : public sdk::Strategy {
 public:
  explicit RingGossip(const nlohmann::json& options) : lr_(options.at("lr").get<double>()) {}

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    params_ = model.network().parameters();
  }

  void zero_grad() override {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }

  void step() override {
    at::NoGradGuard no_grad;
    for (auto& p : params_) {
      if (p.grad().defined()) p.sub_(p.grad() * lr_);
    }
    // The ring is the live nodes in rank order (the same on every node).
    const std::vector<int> ring = ctx_->live_ranks();
    const int n = static_cast<int>(ring.size());
    if (n < 2) return;
    const int position = static_cast<int>(std::find(ring.begin(), ring.end(), ctx_->rank) - ring.begin());
    const int right = ring[static_cast<size_t>((position + 1) % n)];
    const int left = ring[static_cast<size_t>((position + n - 1) % n)];
    const std::vector<at::Tensor> mine(params_.begin(), params_.end());
    if (n == 2) {  // one neighbour: the mean of the pair
      const std::vector<at::Tensor> other = ctx_->communicator().exchange(right, mine);
      for (size_t i = 0; i < params_.size(); ++i) params_[i].add_(other[i]).div_(2);
      return;
    }
    // Every node sends its parameters as they were before the gossip (the
    // exchanges return fresh tensors; `mine` changes only after both). The
    // order by position lets every pair meet, for any number of nodes.
    std::vector<at::Tensor> from_left, from_right;
    if (position % 2 == 0) {
      from_right = ctx_->communicator().exchange(right, mine);
      from_left = ctx_->communicator().exchange(left, mine);
    } else {
      from_left = ctx_->communicator().exchange(left, mine);
      from_right = ctx_->communicator().exchange(right, mine);
    }
    for (size_t i = 0; i < params_.size(); ++i) params_[i].add_(from_left[i]).add_(from_right[i]).div_(3);
  }

  double lr() const override { return lr_; }

 private:
  double lr_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
};

static sdk::OptionSpecs ring_gossip_options() {
  return {{"lr", sdk::OptionType::PositiveNumber, 0.05, "local SGD step size"}};
}

EXOGYM_STRATEGY_PLUGIN("ring_gossip", "1.0.0", RingGossip, ring_gossip_options)
