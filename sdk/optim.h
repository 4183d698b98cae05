#pragma once
// Optimizer specs from JSON, learning-rate schedules and gradient clipping.
// The optimizers and their defaults (PyTorch's, written out; muon's and yogi's
// those of their references): describe_optimizers() and docs/plugins.md#strategies.
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

class Model;  // model.h

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

  // With the model whose parameters `params` are, muon steps the embeddings
  // and head it declares (or adamw_params picks) with its AdamW.
  std::unique_ptr<torch::optim::Optimizer> build(const std::vector<at::Tensor>& params, Model* model = nullptr) const;
};

// The optimizers from_json accepts, for documentation and schemas:
// {"adamw": [{"name": "lr", "type": "positive number", "default": 0.001}, ...], ...}; types are
// "positive number", "non-negative number", "boolean", "positive integer" (with its "maximum"),
// "two numbers in [0, 1)", "name patterns" (null or a list). Names match in any case.
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
