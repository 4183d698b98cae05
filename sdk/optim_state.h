#pragma once
// Checkpoints: a LibTorch optimizer's per-parameter state (adam and adamw:
// step, exp_avg, exp_avg_sq, max_exp_avg_sq; sgd: momentum_buffer; rmsprop:
// step, square_avg, momentum_buffer, grad_avg; adagrad: step, sum; muon:
// momentum_buffer for a matrix, its AdamW fallback's fields for the rest; yogi:
// adam's fields, exp_avg_sq holding its v) under
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

// For strategies that synchronise an optimizer's state (DES-LOC averages
// Adam's moments): field `field` (one of the names above, e.g. "exp_avg")
// of each parameter's state, aliasing the optimizer's tensors, so that
// changing them in place changes the state. Undefined where a parameter has
// no state yet (before its first step) or the field is unset (no
// max_exp_avg_sq without amsgrad). Throws sdk::Error naming the fields the
// optimizer keeps when `field` is not one of them.
std::vector<at::Tensor> optimizer_state_tensors(torch::optim::Optimizer& optimizer,
                                                const std::vector<at::Tensor>& params, const std::string& field);

}  // namespace exogym::sdk
