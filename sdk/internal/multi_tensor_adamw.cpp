// FusedAdamW's step on a device (fused_adamw.h): LibTorch's multi-tensor
// AdamW kernel, one launch per parameter group where torch::optim::AdamW
// launches about ten kernels per parameter. On a GPU with many small nodes
// those launches, not the arithmetic, were the optimizer's cost.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/version.h>

#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "exogym/sdk/internal/fused_adamw.h"
#include "exogym/sdk/internal/optim_state_key.h"

#if TORCH_VERSION_MAJOR >= 2 && __has_include(<ATen/ops/_fused_adamw.h>)
#include <ATen/ops/_fused_adamw.h>
#define EXOGYM_MULTI_TENSOR_ADAMW 1
#else
#define EXOGYM_MULTI_TENSOR_ADAMW 0
#endif

namespace exogym::sdk::internal {

#if EXOGYM_MULTI_TENSOR_ADAMW
namespace {

// What the kernel needs of one group, in parameter order.
struct GroupTensors {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<int64_t> steps;  // each parameter's step count after this step
};

bool dense_like(const at::Tensor& t, const at::Tensor& p) {
  return t.defined() && t.layout() == at::kStrided && t.is_contiguous() && t.device() == p.device() &&
         t.scalar_type() == p.scalar_type() && t.sizes() == p.sizes();
}

// The kernel reads each parameter's step from a float tensor on the device
// (PyTorch keeps it there for that reason). Made with one fill per distinct
// count, on the device: a copy from host memory would wait for the stream.
std::vector<at::Tensor> step_tensors(const std::vector<int64_t>& steps, const at::TensorOptions& options) {
  std::map<int64_t, std::vector<size_t>> by_count;
  for (size_t i = 0; i < steps.size(); ++i) by_count[steps[i]].push_back(i);
  std::vector<at::Tensor> out(steps.size());
  for (const auto& [count, where] : by_count) {
    const std::vector<at::Tensor> filled =
        at::full({static_cast<int64_t>(where.size())}, static_cast<double>(count), options).unbind(0);
    for (size_t j = 0; j < where.size(); ++j) out[where[j]] = filled[j];
  }
  return out;
}

}  // namespace
#endif

bool FusedAdamW::multi_tensor_step() {
#if EXOGYM_MULTI_TENSOR_ADAMW
  using Key = std::decay_t<decltype(state())>::key_type;
  // Everything checked before anything changes.
  std::vector<std::pair<const torch::optim::AdamWOptions*, std::vector<at::Tensor>>> groups;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) return false;
    std::vector<at::Tensor> with_grad;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!at::isFloatingType(p.scalar_type()) || !dense_like(p, p) || !dense_like(p.grad(), p)) return false;
      if (!with_grad.empty() && (p.device() != with_grad[0].device() || p.scalar_type() != with_grad[0].scalar_type()))
        return false;
      auto it = state().find(optimizer_state_key(state(), p));
      if (it != state().end()) {
        auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
        if (!dense_like(s.exp_avg(), p) || !dense_like(s.exp_avg_sq(), p)) return false;
      }
      with_grad.push_back(p);
    }
    if (!with_grad.empty()) groups.emplace_back(&options, std::move(with_grad));
  }
  for (auto& [options, params] : groups) {
    GroupTensors g;
    for (auto& p : params) {
      const Key key = optimizer_state_key(state(), p);
      auto it = state().find(key);
      if (it == state().end()) {
        // LibTorch's fresh state: step 0 and zero moments.
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        it = state().emplace(key, std::move(fresh)).first;
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      s.step(s.step() + 1);
      g.params.push_back(p);
      g.grads.push_back(p.grad());
      g.exp_avgs.push_back(s.exp_avg());
      g.exp_avg_sqs.push_back(s.exp_avg_sq());
      g.steps.push_back(s.step());
    }
    const auto [beta1, beta2] = options->betas();
    const std::vector<at::Tensor> steps = step_tensors(g.steps, params[0].options().dtype(at::kFloat));
    at::_fused_adamw_(g.params, g.grads, g.exp_avgs, g.exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, options->lr(), beta1,
                      beta2, options->weight_decay(), options->eps(), /*amsgrad=*/false, /*maximize=*/false);
  }
  return true;
#else
  return false;
#endif
}

}  // namespace exogym::sdk::internal
