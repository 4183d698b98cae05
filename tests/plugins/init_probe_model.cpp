// A linear layer whose init_parameters() sets every weight to 0.25 and every
// bias to -0.5, and counts its calls (exogym_test_init_probe_calls): checks
// that the runtime initialises node 0's replica, only that one, and that the
// other nodes start from it. Its loss has zero gradient, so plain SGD leaves
// the initial parameters exactly as they were.
#include <ATen/ATen.h>

#include <atomic>
#include <boost/config.hpp>
#include <memory>

#include "exogym/sdk/model.h"
#include "exogym/sdk/plugin.h"
#include "linear_probe.h"

namespace {

std::atomic<int> init_calls{0};

class InitProbeModel final : public exogym::sdk::Model {
 public:
  explicit InitProbeModel(const nlohmann::json& o) : net_(std::make_shared<exogym::test::LinearProbe>(o)) {}
  torch::nn::Module& network() override { return *net_; }
  void init_parameters() override {
    ++init_calls;
    at::NoGradGuard no_grad;
    net_->linear->weight.fill_(0.25);
    net_->linear->bias.fill_(-0.5);
  }
  at::Tensor loss(const exogym::sdk::Batch& batch) override {
    return (net_->linear(batch.at("input").flatten(1)) * 0.0).sum();
  }

 private:
  std::shared_ptr<exogym::test::LinearProbe> net_;
};

}  // namespace

extern "C" BOOST_SYMBOL_EXPORT int exogym_test_init_probe_calls() { return init_calls.load(); }

EXOGYM_MODEL_PLUGIN("init_probe", "0.0.1", InitProbeModel, exogym::test::linear_probe_options)
