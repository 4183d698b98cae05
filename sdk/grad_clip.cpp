// clip_grad_norm (optim.h), as torch.nn.utils.clip_grad_norm_.
#include <ATen/core/grad_mode.h>
#include <ATen/ops/norm.h>
#include <ATen/ops/stack.h>

#include <vector>

#include "exogym/sdk/optim.h"

namespace exogym::sdk {

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  std::vector<at::Tensor> grads;
  for (const auto& param : params)
    if (param.defined() && param.grad().defined()) grads.push_back(param.grad());
  if (grads.empty()) return 0.0;

  at::NoGradGuard no_grad;
  // As torch.nn.utils.clip_grad_norm_: the norm of the per-tensor norms,
  // computed in the gradients' dtype.
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  const auto device = grads.front().device();
  for (const auto& grad : grads) norms.push_back(at::norm(grad.detach(), 2).to(device));
  const at::Tensor total = at::norm(at::stack(norms), 2);
  // Python's `max_norm / (total + 1e-6)` on a tensor is reciprocal() * max_norm,
  // in the tensor's dtype: the same here, so clipped values match PyTorch's.
  const at::Tensor coefficient = total.add(1e-6).reciprocal().mul(max_norm);
  if (coefficient.item<double>() < 1.0)
    for (auto& grad : grads) grad.mul_(coefficient.to(grad.device()));
  return total.item<double>();
}

}  // namespace exogym::sdk
