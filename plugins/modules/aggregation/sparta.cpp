#include "exogym/modules/aggregation/sparta.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <mutex>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/shared.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

sdk::ModuleSpecs SpartaModule::specs() {
  return {"SpartaModule",
          {
              OptionSpec{"p", OptionType::Fraction, 0.005,
                         "fraction of every parameter's elements averaged across the nodes after each step"},
              OptionSpec{"selector", OptionType::String, "random",
                         "how elements are chosen: random (i.i.d. with probability p each step), "
                         "shuffled_sequential (a fixed random order, ceil(1/p) chunks in turn), partitioned "
                         "(balanced random classes in turn, redrawn every cycle); drawn from the run's seed, "
                         "identical on every node",
                         index_selector_names()},
              OptionSpec{"sparta_interval", OptionType::PositiveInteger, 1,
                         "sparse averaging only after steps t with t % sparta_interval == 0 (0-based)"},
          }};
}

SpartaModule::SpartaModule(const sdk::ModuleOptions& o)
    : SpartaModule(o.at("p").get<double>(), o.at("selector").get<std::string>(),
                   o.at("sparta_interval").get<int64_t>()) {}

SpartaModule::SpartaModule(double p, std::string selector, int64_t interval)
    : p_(p), selector_name_(std::move(selector)), interval_(interval) {
  make_index_selector(selector_name_, p_, 0);  // check the name and p now, not at init
}

// One process's selector and its latest call's indices.
struct SpartaModule::Shared {
  std::mutex mutex;
  std::unique_ptr<IndexSelector> selector;
  int64_t call = -1;
  std::vector<at::Tensor> indices;
};

void SpartaModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  params_.clear();
  for (auto& p : sdk::trainable_parameters(model)) params_.push_back(p.detach());
  shared_ = sdk::shared_in_process<Shared>(ctx, "sparta", [&] {
    auto shared = std::make_shared<Shared>();
    shared->selector = make_index_selector(selector_name_, p_, ctx.seed);
    return shared;
  });
}

std::vector<at::Tensor> SpartaModule::indices(int64_t call) {
  // The handles are copied under the lock: a node may draw the next call's
  // while another still uses these (selections are pure functions of the
  // seed, parameter and call, so the order of drawing does not matter).
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->call != call) {
    shared_->indices.clear();
    for (size_t i = 0; i < params_.size(); ++i)
      shared_->indices.push_back(shared_->selector->select(i, params_[i].numel(), call));
    shared_->call = call;
  }
  return shared_->indices;
}

void SpartaModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  if (step % interval_ != 0) return;
  // The selectors' call number follows from the step alone, so a run resumed
  // at any step draws what an uninterrupted run would (no state to save).
  const int64_t call = step / interval_;
  if (ctx.num_nodes == 1) return;  // nobody to average with
  at::NoGradGuard no_grad;

  // Every node draws the same indices (same seed, parameter and call), so
  // the selected values line up without exchanging a mask.
  std::vector<size_t> selected;
  std::vector<at::Tensor> flats, indices, values;
  const std::vector<at::Tensor> drawn = this->indices(call);
  int64_t elements = 0, sent = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& param = params_[i];
    at::Tensor index = drawn[i];
    elements += param.numel();
    sent += index.numel();
    if (index.numel() == 0) continue;  // the same on every node: skipped by all
    index = index.to(param.device());
    // Parameters are contiguous in practice; otherwise work on a copy.
    at::Tensor flat = param.is_contiguous() ? param.view({-1}) : param.contiguous().view({-1});
    values.push_back(flat.index_select(0, index));
    flats.push_back(flat);
    indices.push_back(std::move(index));
    selected.push_back(i);
  }
  // What the selector drew this call (p on average; exact for the
  // sequential selectors).
  if (elements > 0) ctx.record("fraction_sent", static_cast<double>(sent) / static_cast<double>(elements));
  if (values.empty()) return;
  ctx.communicator().all_reduce(values, sdk::ReduceOp::Avg);
  for (size_t k = 0; k < selected.size(); ++k) {
    flats[k].index_copy_(0, indices[k], values[k]);
    at::Tensor& param = params_[selected[k]];
    if (!param.is_contiguous()) param.copy_(flats[k].view(param.sizes()));
  }
}

}  // namespace exogym::modules
