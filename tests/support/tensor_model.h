#pragma once
// A model made of named parameter tensors and nothing else, for the tests
// that drive a strategy or a communication module by hand: its loss is the
// sum of its parameters, and a test reads and sets their values between
// steps.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/model.h"

namespace exogym::test {

class TensorModel final : public sdk::Model {
 public:
  // One parameter per entry, registered in this order, starting from a copy
  // of the given values.
  explicit TensorModel(const std::vector<std::pair<std::string, at::Tensor>>& params)
      : net_(std::make_shared<torch::nn::Module>()) {
    for (const auto& [name, value] : params) params_.push_back(net_->register_parameter(name, value.clone()));
  }

  torch::nn::Module& network() override { return *net_; }
  at::Tensor loss(const sdk::Batch& /*batch*/) override {
    at::Tensor sum = params_.at(0).sum();
    for (size_t i = 1; i < params_.size(); ++i) sum = sum + params_[i].sum();
    return sum;
  }

  // Parameter i itself, and a detached copy of its values.
  at::Tensor& param(size_t i = 0) { return params_.at(i); }
  at::Tensor value(size_t i = 0) const { return params_.at(i).detach().clone(); }
  std::vector<at::Tensor> values() const {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < params_.size(); ++i) out.push_back(value(i));
    return out;
  }
  void set(const std::vector<at::Tensor>& values) {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(values.at(i));
  }
  void set(const at::Tensor& value) { set(std::vector<at::Tensor>{value}); }

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::vector<at::Tensor> params_;
};

}  // namespace exogym::test
