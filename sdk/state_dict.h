#pragma once
// Named tensors of a state: what a strategy saves for a checkpoint, sends a recovering node or keeps for a client
// (strategy.h), and what a handle in flight saves of itself (pending.h). A module puts the prefix it is given before
// its keys.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace exogym::sdk {

using StateDict = std::map<std::string, at::Tensor>;

// in[key]; sdk::Error naming the key when it is missing.
const at::Tensor& state_tensor(const StateDict& in, const std::string& key);
// A list of tensors as "<prefix>0", "<prefix>1", ..., aliasing them. Loading copies "<prefix><i>" into tensors[i];
// sdk::Error naming a key that is missing or of another shape.
void save_tensors(StateDict& out, const std::string& prefix, const std::vector<at::Tensor>& tensors);
void load_tensors(const StateDict& in, const std::string& prefix, std::vector<at::Tensor>& tensors);

}  // namespace exogym::sdk
