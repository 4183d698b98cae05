#pragma once
// Optimizer specs from JSON, learning-rate schedules and gradient clipping. The optimizers and their defaults
// (PyTorch's, written out; muon's and yogi's their references'): docs/plugins.md#strategies.
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

  // "adamw" or {"name": "adamw", "lr": 3e-4, ...}, PyTorch's defaults for what it leaves out; only an object without
  // "name" is merged over `fallback` (DiLoCo's outer Nesterov SGD), null is `fallback`.
  static OptimizerSpec from_json(const nlohmann::json& json, const std::string& path,
                                 const nlohmann::json& fallback = nullptr);
  nlohmann::json to_json() const;
  double lr() const;
  // With the model, muon steps the embeddings and head it declares (or adamw_params picks) with AdamW.
  std::unique_ptr<torch::optim::Optimizer> build(const std::vector<at::Tensor>& params, Model* model = nullptr) const;
};

void set_lr(torch::optim::Optimizer& optimizer, double lr);
double get_lr(const torch::optim::Optimizer& optimizer);

// A learning-rate factor per step: "constant" (1 after warm-up), "cosine" (the reference's, decaying to min_factor 0.1
// at max_steps) or "linear" (down to min_factor 0.0). Warm-up step s < W uses (s + 1) / W, so the first step already
// learns; past max_steps (default: the run's) the factor stays at min_factor. (The reference used s / W, LR 0 at step
// 0, and its cosine rose again past max_steps.)
struct LrSchedule {
  std::string name = "constant";
  int64_t warmup_steps = 0;
  double min_factor = 1.0;
  int64_t max_steps = 0;  // 0: the run's max_steps

  static LrSchedule from_json(const nlohmann::json& json, const std::string& path);
  nlohmann::json to_json() const;
  double factor(int64_t step, int64_t run_max_steps) const;
};

// Global-L2-norm clipping as torch.nn.utils.clip_grad_norm_: the gradients scaled by min(1, max_norm / (norm + 1e-6)).
// Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace exogym::sdk
