#include "exogym/runtime/train/divergence.h"

#include <ATen/ATen.h>

namespace exogym::runtime::train {

Diverged::Diverged(int node, int64_t step, const std::string& what)
    : sdk::Error("node " + std::to_string(node) + ", step " + std::to_string(step) + ": " + what +
                 " is not finite: the training diverged (lower the learning rate, clip gradients with max_norm, or "
                 "set train.on_nonfinite to \"continue\" to train on)"),
      node_(node),
      step_(step) {}

int64_t first_nonfinite(const std::vector<at::Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (t.defined() && t.is_floating_point() && !at::isfinite(t).all().item<bool>()) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace exogym::runtime::train
