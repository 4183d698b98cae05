#pragma once
// Checkpoints: a LibTorch optimizer's per-parameter state (adam and adamw:
// step, exp_avg, exp_avg_sq, max_exp_avg_sq; sgd: momentum_buffer; rmsprop:
// step, square_avg, momentum_buffer, grad_avg; adagrad: step, sum; muon:
// momentum_buffer for a matrix, its AdamW fallback's fields for the rest) under
// "<prefix><i>.<field>", i being the parameter's position in `params` (the
// list the optimizer was built over). Steps are 0-D int64 tensors. State the
// optimizer has not created yet (before its first step) is not saved, and
// loading leaves it absent, so a restored optimizer continues bit for bit.
// The saved tensors alias the optimizer's: write them out before its next
// step. Saving another optimizer's state throws sdk::Error;
// load_optimizer_state throws sdk::Error when a saved tensor's shape does
// not match its parameter's.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "exogym/sdk/strategy.h"

namespace torch::optim {
class Optimizer;
}

namespace exogym::sdk {

void save_optimizer_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params, StateDict& out,
                          const std::string& prefix);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params,
                          const StateDict& in, const std::string& prefix);

}  // namespace exogym::sdk
