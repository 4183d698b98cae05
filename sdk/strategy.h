#pragma once
// A strategy decides how nodes communicate and update. The runtime computes a
// node's gradients, then calls step() where a plain loop would call
// optimizer.step(); the strategy owns the optimizer, the LR schedule and all
// communication.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace exogym::sdk {

class Model;
struct NodeContext;

// Named tensors a strategy saves and restores (optimizer moments, DiLoCo's
// master copy, ...). Keys are the strategy's own.
using StateDict = std::map<std::string, at::Tensor>;

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Called once per node, after the model is on its device and node 0's
  // parameters were broadcast to every node. `ctx` and `model` outlive the
  // strategy.
  virtual void init(NodeContext& ctx, Model& model) = 0;

  // Clears the gradients before a step's backward passes.
  virtual void zero_grad() = 0;

  // Called once per step after the (accumulated, averaged) local gradients are
  // in param.grad(). ctx.step is the 0-based index of this step.
  virtual void step() = 0;

  // The learning rate the local optimizer used in the last step (for logs).
  virtual double lr() const { return 0.0; }

  // Checkpoint hooks.
  virtual void save_state(StateDict& /*out*/) const {}
  virtual void load_state(const StateDict& /*in*/) {}
};

}  // namespace exogym::sdk
