#pragma once
// Divergence: a training loss or parameter that became NaN or infinite
// (train.on_nonfinite). By default the run stops at the first one, instead of
// training on and saving a model full of NaN. What is checked when, chosen
// for cost: every node's training loss every step (free: the loss is already
// on the CPU), every node's parameters at each evaluation (one pass over the
// parameters, small next to an evaluation), and the averaged model before it
// is saved.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

// Thrown on the node that saw it; the run stops with exit 1 and marks
// summary.json (see training.cpp).
class Diverged : public sdk::Error {
 public:
  Diverged(int node, int64_t step, const std::string& what);
  int node() const { return node_; }
  int64_t step() const { return step_; }

 private:
  int node_;
  int64_t step_;
};

// The first tensor of `tensors` holding a NaN or an infinity; -1 if none.
int64_t first_nonfinite(const std::vector<at::Tensor>& tensors);

}  // namespace exogym::runtime::train
