#pragma once
// A replica's state as the runtime averages, evaluates and saves it.
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/comm.h"

namespace torch::nn {
class Module;
}

namespace exogym::runtime::train {

struct FloatState {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
};

// Parameters, then floating-point buffers (e.g. BatchNorm statistics): the
// state that training changes and that averaging makes sense for. The
// tensors are the module's own.
FloatState float_state(torch::nn::Module& module);

// Detached copies.
std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors);

// A copy of `tensors` averaged over every node (a collective).
std::vector<at::Tensor> averaged_over_nodes(const std::vector<at::Tensor>& tensors, sdk::Communicator& comm);

// `tensors` themselves averaged over every node (a collective), returned
// detached: for the end of training, when each node's own values are not
// needed any more and a copy on every node would double the run's peak.
std::vector<at::Tensor> average_in_place(const std::vector<at::Tensor>& tensors, sdk::Communicator& comm);

// Drops the module's gradients (Strategy::step's contract): after a step
// they are dead, since the next step clears them first, and only the nodes
// computing at the moment need theirs, so a node between steps holds none
// (a quarter of an AdamW node's memory).
void release_gradients(torch::nn::Module& module);

// A node's gradient is the mean of its micro-batches' mean gradients: the
// sums backward() left in `params`' gradients divided by their number.
void average_micro_batch_gradients(const std::vector<at::Tensor>& params, int64_t micro_batches);

// Overwrites `state` (a module's own tensors) with `values`, outside autograd.
void overwrite(std::vector<at::Tensor>& state, const std::vector<at::Tensor>& values);

// The final model as model.pt holds it: `averaged` (float_state's tensors
// averaged over the nodes) under float_state's names, then the integer
// buffers (e.g. BatchNorm's num_batches_tracked) of `module`, which has them
// as node 0's.
std::vector<std::pair<std::string, at::Tensor>> saved_model(const FloatState& state,
                                                            const std::vector<at::Tensor>& averaged,
                                                            torch::nn::Module& module);

}  // namespace exogym::runtime::train
