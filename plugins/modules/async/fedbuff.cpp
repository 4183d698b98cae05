#include "exogym/modules/async/fedbuff.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <map>
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

class BufferServer final : public sdk::AsyncServer {
 public:
  BufferServer(const std::vector<at::Tensor>& params, int nodes, int64_t buffer, double server_lr, double exponent)
      : buffer_(buffer), server_lr_(server_lr), exponent_(exponent) {
    models_[0] = clones(params);
    for (int r = 0; r < nodes; ++r) bases_[r] = 0;  // every node starts from version 0
  }

  void receive(const std::vector<sdk::AsyncUpdate>& arrivals) override {
    for (const auto& update : arrivals) {
      if (update.tensors.size() != current().size()) throw sdk::Error("fedbuff: an update of the wrong length");
      const double staleness = static_cast<double>(version_ - update.base_version);
      held_.push_back({update.tensors, update.base_version, std::pow(1.0 + staleness, -exponent_)});
      if (static_cast<int64_t>(held_.size()) == buffer_) flush();
    }
  }
  std::vector<at::Tensor> reply(int rank) override {
    bases_[rank] = version_;
    forget_unused_models();
    return clones(current());
  }
  int64_t version() const override { return version_; }
  void save_state(sdk::StateDict& out) const override {
    out["version"] = at::scalar_tensor(version_, at::kLong);
    for (const auto& [v, model] : models_) sdk::save_tensors(out, "model." + std::to_string(v) + ".", model);
    std::vector<int64_t> bases;
    for (const auto& [rank, v] : bases_) bases.insert(bases.end(), {rank, v});
    out["bases"] = at::tensor(bases, at::kLong);
    std::vector<int64_t> held_bases;
    std::vector<double> held_weights;
    for (size_t k = 0; k < held_.size(); ++k) {
      sdk::save_tensors(out, "held." + std::to_string(k) + ".", held_[k].params);
      held_bases.push_back(held_[k].base_version);
      held_weights.push_back(held_[k].weight);
    }
    out["held_bases"] = at::tensor(held_bases, at::kLong);
    out["held_weights"] = at::tensor(held_weights, at::kDouble);
  }
  void load_state(const sdk::StateDict& in) override {
    const std::vector<at::Tensor> like = current();  // shapes and dtypes
    version_ = sdk::state_tensor(in, "version").item<int64_t>();
    const at::Tensor bases = sdk::state_tensor(in, "bases").contiguous();
    bases_.clear();
    for (int64_t i = 0; i + 1 < bases.numel(); i += 2)
      bases_[static_cast<int>(bases[i].item<int64_t>())] = bases[i + 1].item<int64_t>();
    const at::Tensor held_bases = sdk::state_tensor(in, "held_bases"),
                     held_weights = sdk::state_tensor(in, "held_weights");
    held_.clear();
    for (int64_t k = 0; k < held_bases.numel(); ++k) {
      Held h{clones(like), held_bases[k].item<int64_t>(), held_weights[k].item<double>()};
      sdk::load_tensors(in, "held." + std::to_string(k) + ".", h.params);
      held_.push_back(std::move(h));
    }
    models_.clear();
    for (const auto& [rank, v] : bases_) models_.emplace(v, clones(like));
    for (const auto& h : held_) models_.emplace(h.base_version, clones(like));
    models_.emplace(version_, clones(like));
    for (auto& [v, model] : models_) sdk::load_tensors(in, "model." + std::to_string(v) + ".", model);
  }

 private:
  struct Held {
    std::vector<at::Tensor> params;
    int64_t base_version;
    double weight;
  };
  const std::vector<at::Tensor>& current() const { return models_.at(version_); }

  void flush() {
    at::NoGradGuard no_grad;
    bool plain_mean = server_lr_ == 1.0;
    for (const auto& h : held_) plain_mean = plain_mean && h.base_version == version_ && h.weight == held_[0].weight;
    std::vector<at::Tensor> next;
    const double n = static_cast<double>(held_.size());
    for (size_t i = 0; i < current().size(); ++i) {
      at::Tensor t;
      if (plain_mean) {
        // FedAvg's all_reduce: x0 + x1 + ... in order, then / n.
        t = held_[0].params[i].clone();
        for (size_t k = 1; k < held_.size(); ++k) t.add_(held_[k].params[i]);
        t.div_(n);
      } else {
        t = current()[i].clone();
        for (const auto& h : held_) t.add_(h.params[i] - models_.at(h.base_version)[i], server_lr_ * h.weight / n);
      }
      next.push_back(t);
    }
    held_.clear();
    models_[++version_] = std::move(next);
  }
  // Keeps the models some node's round started from, for their updates.
  void forget_unused_models() {
    for (auto it = models_.begin(); it != models_.end();) {
      bool used = it->first == version_;
      for (const auto& [rank, v] : bases_) used = used || v == it->first;
      for (const auto& h : held_) used = used || h.base_version == it->first;
      it = used ? std::next(it) : models_.erase(it);
    }
  }

  int64_t buffer_;
  double server_lr_, exponent_;
  int64_t version_ = 0;
  std::map<int64_t, std::vector<at::Tensor>> models_;  // by version
  std::map<int, int64_t> bases_;                       // each node's last reply
  std::vector<Held> held_;
};

}  // namespace

sdk::ModuleSpecs FedBuffModule::specs() {
  sdk::OptionSpecs specs = round_specs(10, false);
  specs.push_back(OptionSpec{"buffer", OptionType::PositiveInteger, nullptr,
                             "updates the server collects before it moves its model (null: the number of nodes; at "
                             "most that)"});
  specs.push_back(OptionSpec{"server_lr", OptionType::PositiveNumber, 1.0, "the server's learning rate"});
  specs.push_back(OptionSpec{"staleness_exponent", OptionType::NonNegativeNumber, 0.5,
                             "an update s server versions old weighs (1 + s)^-exponent (0: all alike)"});
  return {"FedBuffModule", specs};
}

FedBuffModule::FedBuffModule(const sdk::ModuleOptions& o)
    : AsyncRounds(o),
      buffer_(o.at("buffer").is_null() ? std::nullopt : std::optional<int64_t>(o.at("buffer").get<int64_t>())),
      server_lr_(o.at("server_lr").get<double>()),
      exponent_(o.at("staleness_exponent").get<double>()) {}

std::shared_ptr<sdk::AsyncServer> FedBuffModule::make_server(sdk::NodeContext& ctx,
                                                             const std::vector<at::Tensor>& params) {
  const int64_t buffer = buffer_.value_or(ctx.num_nodes);
  if (buffer > ctx.num_nodes) {
    throw sdk::ConfigError("buffer", "a buffer of " + std::to_string(buffer) + " updates never fills with " +
                                         std::to_string(ctx.num_nodes) + " nodes, each with one update in flight");
  }
  return sdk::shared_in_process<BufferServer>(ctx, "fedbuff.server", [&] {
    return std::make_shared<BufferServer>(params, ctx.num_nodes, buffer, server_lr_, exponent_);
  });
}

std::vector<at::Tensor> FedBuffModule::update(const std::vector<at::Tensor>& params,
                                              const std::vector<at::Tensor>& /*base*/) {
  return clones(params);
}

}  // namespace exogym::modules
