#pragma once
// Lists of tensors in a strategy's or server's state (sdk::StateDict):
// saved as "<prefix><i>", and back into tensors of the same shapes.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "exogym/sdk/strategy.h"

namespace exogym::modules {

// in[key]; sdk::Error naming the key when it is missing.
const at::Tensor& state_tensor(const sdk::StateDict& in, const std::string& key);
// `tensors` as "<prefix><i>" (aliases: written out before the next step).
void save_tensors(sdk::StateDict& out, const std::string& prefix, const std::vector<at::Tensor>& tensors);
// Copies "<prefix><i>" into tensors[i]; sdk::Error naming the key when one
// is missing or has another shape than tensors[i].
void load_tensors(const sdk::StateDict& in, const std::string& prefix, std::vector<at::Tensor>& tensors);

}  // namespace exogym::modules
