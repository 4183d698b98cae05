#pragma once
// A strategy decides how nodes communicate and update: the runtime computes a node's gradients and calls step() where a
// plain loop would call optimizer.step(); the strategy owns the optimizer, the LR schedule and all communication
// (docs/plugins.md#strategies).
//
// Every node has its own instance, made by the plugin's factory before training (node 0's first, the others' possibly
// at once on helper threads) from options validated against its OptionSpecs, then used only on its node's thread, and
// destroyed on the main thread after every node has finished. A ConfigError from any function below is the user's to
// fix (reported under "strategy.options.<its path>", exit 2); any other exception ends the run, the others' collectives
// throw AbortedError, and the first error is reported with the node, step and plugin.
#include <ATen/core/Tensor.h>

#include "exogym/sdk/state_dict.h"

namespace exogym::sdk {

class Model;
struct NodeContext;

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Once per node, after the model is on its device and node 0's parameters and buffers were broadcast, before step 0.
  // May call collectives. `ctx` and `model` outlive the strategy.
  virtual void init(NodeContext& ctx, Model& model) = 0;
  virtual void zero_grad() = 0;  // first thing of every step (after its evaluation, if any)
  // Whether the node computes this step. False: no batch, forward or backward; step() still runs, without gradients, to
  // communicate (FedProx's partial work).
  virtual bool computes() const { return true; }
  // After the step's backward passes: param.grad() holds the gradient averaged over the micro-batches (undefined for a
  // parameter that got none); ctx.step is the 0-based step. What goes through ctx.comm is metered. Afterwards the
  // runtime releases the gradients: copy what must outlive the step.
  virtual void step() = 0;
  virtual double lr() const { return 0.0; }  // the last step's, for train.csv (read on node 0's thread)

  // Checkpoints (docs/checkpoints.md): what, with the model's parameters and buffers, continues the run exactly
  // (optimizer moments, master copies, residuals, generators; not what follows from ctx.step and ctx.seed). save_state
  // runs at a step boundary and may alias live tensors; on resume the runtime restores the model, calls init(), then
  // load_state. No collectives; errors are sdk::Error.
  virtual void save_state(StateDict& /*out*/) const {}
  virtual void load_state(const StateDict& /*in*/) {}

  // Failures (docs/simulation.md#failures-and-churn): a node that comes back has lost its memory and receives
  // recovery_state from a live donor (counted as recovery traffic), then load_recovery_state, each on its node's thread
  // at the step boundary; no collectives. Default: the model's parameters and buffers ("model.<name>") and what
  // save_state saves ("state.<key>"). Override to send less: DiLoCo sends its master copy and outer state.
  virtual void recovery_state(Model& model, StateDict& out) const;
  virtual void load_recovery_state(Model& model, const StateDict& in);

  // State that is a client's own, not the model's (a residual, a control variate;
  // docs/plugins.md#state-that-belongs-to-a-client). With participation, save_client_state runs on a node whose client
  // leaves (the tensors are copied to the CPU and kept for the client, no bytes sent), load_client_state on a node that
  // takes a client on, after load_recovery_state, with that client's last save (empty for a new client). No
  // collectives. Without participation neither is called.
  virtual bool has_client_state() const { return false; }
  virtual void save_client_state(StateDict& /*out*/) const {}
  virtual void load_client_state(const StateDict& /*in*/) {}
};

// The model's part of a recovery state: its buffers and, with `parameters`, its parameters, as "model.<name>", aliased;
// loading copies them back (sdk::Error names a missing tensor).
void save_model_tensors(Model& model, StateDict& out, bool parameters = true);
void load_model_tensors(Model& model, const StateDict& in, bool parameters = true);

}  // namespace exogym::sdk
