#pragma once
// Yogi (Zaheer et al., NeurIPS 2018), the server optimizer of FedYogi
// (Reddi et al., "Adaptive Federated Optimization", ICLR 2021) when it is
// DiLoCo's outer optimizer. Adam, but the second moment moves towards g²
// by a fixed step instead of a fraction of the gap, so that it cannot grow
// fast after a burst of large gradients:
//   g = grad + weight_decay * p
//   m = beta1 * m + (1 - beta1) * g
//   v = v - (1 - beta2) * sign(v - g²) * g²       v starts at initial_accumulator_value
//   p = p - lr * c * m / (sqrt(v) + eps)
// with Adam's bias correction c = sqrt(1 - beta2^t) / (1 - beta1^t) (as
// TensorFlow Addons' Yogi), or c = 1 with bias_correction false (Reddi et
// al.'s Algorithm 2).
//
// State, checkpointed by optim_state.h as LibTorch's AdamParamState: step,
// exp_avg (m), exp_avg_sq (v).
//
// A detail of the SDK's optimizers, not part of the contract: a plugin gets
// it from OptimizerSpec::build ("yogi"), as a torch::optim::Optimizer.
#include <torch/optim/optimizer.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

namespace exogym::sdk::internal {

struct YogiOptions : public torch::optim::OptimizerCloneableOptions<YogiOptions> {
  explicit YogiOptions(double learning_rate = 1e-2) : lr(learning_rate) {}

  double lr;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-3;
  double initial_accumulator_value = 1e-6;
  double weight_decay = 0;
  bool bias_correction = true;

  double get_lr() const override { return lr; }
  void set_lr(const double value) override { lr = value; }
};

class Yogi : public torch::optim::Optimizer {
 public:
  Yogi(const std::vector<at::Tensor>& params, const YogiOptions& options);
  at::Tensor step(LossClosure closure = nullptr) override;
};

// OptimizerSpec::build's "yogi", from its validated hyper-parameters.
std::unique_ptr<torch::optim::Optimizer> build_yogi(const nlohmann::json& hyper_parameters,
                                                    const std::vector<at::Tensor>& params);

}  // namespace exogym::sdk::internal
