#include "exogym/runtime/train/model_state.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

namespace exogym::runtime::train {

FloatState float_state(torch::nn::Module& module) {
  FloatState out;
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    out.names.push_back(item.key());
    out.tensors.push_back(item.value());
  }
  for (auto& item : module.named_buffers(/*recurse=*/true)) {
    if (!at::isFloatingType(item.value().scalar_type())) continue;
    out.names.push_back(item.key());
    out.tensors.push_back(item.value());
  }
  return out;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

std::vector<at::Tensor> averaged_over_nodes(const std::vector<at::Tensor>& tensors, sdk::Communicator& comm) {
  std::vector<at::Tensor> averaged = clones(tensors);
  comm.all_reduce(averaged, sdk::ReduceOp::Avg);
  return averaged;
}

std::vector<at::Tensor> average_in_place(const std::vector<at::Tensor>& tensors, sdk::Communicator& comm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> own;
  own.reserve(tensors.size());
  for (const auto& t : tensors) own.push_back(t.detach());
  comm.all_reduce(own, sdk::ReduceOp::Avg);
  return own;
}

void release_gradients(torch::nn::Module& module) {
  for (auto& p : module.parameters()) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

void average_micro_batch_gradients(const std::vector<at::Tensor>& params, int64_t micro_batches) {
  if (micro_batches <= 1) return;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : params)
    if (p.grad().defined()) p.grad().div_(static_cast<double>(micro_batches));
}

void overwrite(std::vector<at::Tensor>& state, const std::vector<at::Tensor>& values) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < state.size(); ++i) state[i].detach().copy_(values[i]);
}

std::vector<std::pair<std::string, at::Tensor>> saved_model(const FloatState& state,
                                                            const std::vector<at::Tensor>& averaged,
                                                            torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t i = 0; i < averaged.size(); ++i) named.emplace_back(state.names[i], averaged[i]);
  for (auto& item : module.named_buffers(/*recurse=*/true)) {
    if (!at::isFloatingType(item.value().scalar_type())) named.emplace_back(item.key(), item.value());
  }
  return named;
}

}  // namespace exogym::runtime::train
