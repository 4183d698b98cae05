#pragma once
// Optimizer specs from JSON, learning-rate schedules and gradient clipping.
// Optimizers, with PyTorch's defaults written out (LibTorch's differ: SGD has no default lr):
//   adam(w)  lr 1e-3, betas [0.9, 0.999], eps 1e-8, weight_decay 0 (adamw: 0.01), amsgrad false
//   sgd      lr 1e-3, momentum 0, dampening 0, weight_decay 0, nesterov false
//   rmsprop  lr 1e-2, alpha 0.99, eps 1e-8, weight_decay 0, momentum 0, centered false
//   adagrad  lr 1e-2, lr_decay 0, weight_decay 0, initial_accumulator_value 0, eps 1e-10
//   muon     (sdk/internal/muon.h) matrices: lr 0.02, momentum 0.95, nesterov true, ns_steps 5, weight_decay 0;
//            the rest AdamW: adamw_lr 3e-4, adamw_betas [0.9, 0.95], adamw_eps 1e-8, adamw_weight_decay 0
//   yogi     (sdk/internal/yogi.h: FedYogi as DiLoCo's outer optimizer) lr 1e-2, betas [0.9, 0.999],
//            eps 1e-3, initial_accumulator_value 1e-6, weight_decay 0, bias_correction true
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace exogym::sdk {

struct OptimizerSpec {
  std::string name = "adamw";
  nlohmann::json params;  // every hyper-parameter of `name`, defaults filled in

  // Accepts "adamw" or {"name": "adamw", "lr": 3e-4, ...}. A name, alone or
  // in an object, is a complete spec: what the object leaves out takes
  // PyTorch's defaults. Only an object without "name" is merged over
  // `fallback` (a plugin's default, e.g. DiLoCo's outer Nesterov SGD); null
  // is `fallback` itself. Errors name `path`.
  static OptimizerSpec from_json(const nlohmann::json& json, const std::string& path,
                                 const nlohmann::json& fallback = nullptr);
  nlohmann::json to_json() const;  // {"name": ..., every hyper-parameter}
  double lr() const;

  std::unique_ptr<torch::optim::Optimizer> build(const std::vector<at::Tensor>& params) const;
};

// The optimizers from_json accepts, for documentation and schemas:
// {"adamw": [{"name": "lr", "type": "positive number", "default": 0.001}, ...], ...}; types are
// "positive number", "non-negative number", "boolean", "positive integer" (with its "maximum"),
// "two numbers in [0, 1)". Names match in any case.
nlohmann::json describe_optimizers();

// Sets / reads the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);
double get_lr(const torch::optim::Optimizer& optimizer);

// A learning-rate multiplier per step.
//   constant: 1 after warm-up
//   cosine:   the reference's warm-up + cosine, decaying to min_factor (0.1)
//             at max_steps
//   linear:   warm-up, then a straight line down to min_factor (0.0)
// Warm-up is linear over warmup_steps: step s < W uses (s + 1) / W, so the
// first step already learns (the reference used s / W, i.e. LR 0 at step 0).
// Past max_steps the factor stays at min_factor (the reference's cosine rose
// again). max_steps defaults to the run's train.max_steps.
struct LrSchedule {
  std::string name = "constant";
  int64_t warmup_steps = 0;
  double min_factor = 1.0;
  int64_t max_steps = 0;  // 0: the run's max_steps

  static LrSchedule from_json(const nlohmann::json& json, const std::string& path);
  nlohmann::json to_json() const;
  double factor(int64_t step, int64_t run_max_steps) const;
};

// Global-L2-norm clipping as torch.nn.utils.clip_grad_norm_: gradients are
// scaled by min(1, max_norm / (norm + 1e-6)). Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace exogym::sdk
