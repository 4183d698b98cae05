// SGD on gradients averaged `delay` steps late, through the SDK's
// non-blocking collectives (sdk/pending.h): every `every` steps the step's
// gradients start to average, and an average started `delay` steps before
// is waited for and applied. With "blocking": true the same averages come
// from blocking calls, held for `delay` steps: the same bits and bytes, but
// the clock pays every transfer at once. It tests the overlap end to end:
// the simulated clock, handles in flight across checkpoints, the error for
// a handle dropped ("leak": "drop") and a handle kept in flight past the
// run's last step ("leak": "end"), on node `leak_node`.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/pending.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace {

namespace sdk = exogym::sdk;

sdk::OptionSpecs delayed_sgd_options() {
  using sdk::OptionSpec;
  using sdk::OptionType;
  return {OptionSpec{"delay", OptionType::NonNegativeInteger, 1, "steps between an average's start and its use"},
          OptionSpec{"every", OptionType::PositiveInteger, 1, "start an average every this many steps"},
          OptionSpec{"blocking", OptionType::Boolean, false, "blocking collectives instead, results held"},
          OptionSpec{
              "collective", OptionType::String, "all_reduce", "how the average is taken", {"all_reduce", "all_gather"}},
          OptionSpec{"leak",
                     OptionType::String,
                     "none",
                     "drop a handle, or keep the last one in flight past the run's end",
                     {"none", "drop", "end"}},
          OptionSpec{"leak_node", OptionType::NonNegativeInteger, 1, "the node that leaks"},
          OptionSpec{"leak_step", OptionType::NonNegativeInteger, 2, "the step whose handle \"drop\" drops"},
          OptionSpec{"lr", OptionType::PositiveNumber, 0.1, "plain SGD learning rate"}};
}

// One average on its way: the handle of the collective that takes it, or
// (blocking) its result already.
struct Average {
  sdk::Pending pending;
  std::vector<at::Tensor> held;
};

// The mean over ranks of `n` tensors each, given rank by rank
// (all_gather_async's list).
std::vector<at::Tensor> mean_of(const std::vector<at::Tensor>& by_rank, size_t n) {
  const size_t ranks = by_rank.size() / n;
  std::vector<at::Tensor> mean;
  for (size_t i = 0; i < n; ++i) {
    at::Tensor sum = by_rank[i].clone();
    for (size_t r = 1; r < ranks; ++r) sum.add_(by_rank[r * n + i]);
    mean.push_back(sum.div_(static_cast<double>(ranks)));
  }
  return mean;
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& by_rank) {
  std::vector<at::Tensor> all;
  for (const auto& tensors : by_rank) all.insert(all.end(), tensors.begin(), tensors.end());
  return all;
}

class DelayedSgd final : public sdk::Strategy {
 public:
  explicit DelayedSgd(const nlohmann::json& o)
      : delay_(o.at("delay").get<int64_t>()),
        every_(o.at("every").get<int64_t>()),
        blocking_(o.at("blocking").get<bool>()),
        collective_(o.at("collective").get<std::string>()),
        leak_(o.at("leak").get<std::string>()),
        leak_node_(o.at("leak_node").get<int>()),
        leak_step_(o.at("leak_step").get<int64_t>()),
        lr_(o.at("lr").get<double>()) {}

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
    const int64_t t = ctx_->step;
    const bool last = t + 1 == ctx_->max_steps;
    const bool leaks = ctx_->rank == leak_node_;
    if (t % every_ == 0) {
      averages_[t] = start();
      if (leaks && leak_ == "drop" && t == leak_step_) averages_.erase(t);
    }
    for (auto it = averages_.begin(); it != averages_.end();) {
      const bool forgotten = leaks && leak_ == "end" && last && it->first == t;
      if ((it->first + delay_ > t && !last) || forgotten) {
        ++it;
        continue;
      }
      apply(result(it->second));
      it = averages_.erase(it);
    }
  }
  double lr() const override { return lr_; }

  void save_state(sdk::StateDict& out) const override {
    for (const auto& [start, average] : averages_) {
      const std::string prefix = "average." + std::to_string(start) + ".";
      average.pending.save(out, prefix);
      sdk::save_tensors(out, prefix + "held.", average.held);
    }
  }
  void load_state(const sdk::StateDict& in) override {
    averages_.clear();
    for (const auto& [key, tensor] : in) {
      const size_t dot = key.find('.', 8);
      if (key.compare(0, 8, "average.") != 0 || dot == std::string::npos) continue;
      const int64_t start = std::stoll(key.substr(8, dot - 8));
      if (averages_.count(start)) continue;
      const std::string prefix = key.substr(0, dot + 1);
      Average& average = averages_[start];
      sdk::Communicator& comm = ctx_->communicator();
      average.pending = sdk::Pending::load(in, prefix, comm);
      for (size_t i = 0; in.count(prefix + "held." + std::to_string(i)); ++i)
        average.held.push_back(in.at(prefix + "held." + std::to_string(i)).clone());
    }
  }

 private:
  Average start() {
    std::vector<at::Tensor> grads;
    for (auto& p : params_) grads.push_back(p.grad().defined() ? p.grad().detach().clone() : at::zeros_like(p));
    sdk::Communicator& comm = ctx_->communicator();
    Average average;
    if (collective_ == "all_reduce") {
      if (!blocking_) return Average{comm.all_reduce_async(grads, sdk::ReduceOp::Avg), {}};
      comm.all_reduce(grads, sdk::ReduceOp::Avg);
      average.held = grads;
    } else {
      // Held as they arrived: the mean is taken when the average is used.
      if (!blocking_) return Average{comm.all_gather_async(grads), {}};
      average.held = flat(comm.all_gather(grads));
    }
    return average;
  }
  std::vector<at::Tensor> result(Average& average) const {
    std::vector<at::Tensor> arrived = average.pending.valid() ? average.pending.wait() : average.held;
    return collective_ == "all_gather" ? mean_of(arrived, params_.size()) : arrived;
  }
  void apply(const std::vector<at::Tensor>& mean) {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].sub_(mean[i] * lr_);
  }

  int64_t delay_, every_;
  bool blocking_;
  std::string collective_, leak_;
  int leak_node_;
  int64_t leak_step_;
  double lr_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
  std::map<int64_t, Average> averages_;  // by the step that started them
};

}  // namespace

EXOGYM_STRATEGY_PLUGIN("delayed_sgd", "0.0.1", DelayedSgd, delayed_sgd_options)
