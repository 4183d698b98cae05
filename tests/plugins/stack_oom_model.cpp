// A linear classifier whose stacked forward runs out of memory, as a stack
// of nodes too large for its device does: checks the error that says what
// the stack held and what to set instead (train/stack_group.cpp). Per node
// it trains.
#include <ATen/ATen.h>

#include <memory>
#include <new>

#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"
#include "linear_probe.h"

namespace {

class StackOomModel final : public exogym::sdk::Model {
 public:
  explicit StackOomModel(const nlohmann::json& o) : net_(std::make_shared<exogym::test::LinearProbe>(o)) {}
  torch::nn::Module& network() override { return *net_; }
  at::Tensor loss(const exogym::sdk::Batch& batch) override {
    return at::cross_entropy_loss(net_->linear(batch.at("input").flatten(1)), batch.at("target"));
  }
  bool supports_stacking() const override { return true; }
  at::Tensor stacked_loss(const exogym::sdk::Stack&, const exogym::sdk::Batch&) override { throw std::bad_alloc(); }

 private:
  std::shared_ptr<exogym::test::LinearProbe> net_;
};

}  // namespace

EXOGYM_MODEL_PLUGIN("stack_oom", "0.0.1", StackOomModel, exogym::test::linear_probe_options)
