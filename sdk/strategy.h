#pragma once
// A strategy decides how nodes communicate and update. The runtime computes a
// node's gradients, then calls step() where a plain loop would call
// optimizer.step(); the strategy owns the optimizer, the LR schedule and all
// communication.
//
// Lifetime: every node has its own instance, made by the plugin's factory on
// the main thread before training (node 0's first, the others' possibly at
// once on helper threads) from options validated against its OptionSpecs. A
// ConfigError thrown by the constructor or any function below (init() may
// check options against the model) is the user's to fix: reported under
// "strategy.options.<its path>" with the variant, exit status 2. Each node's
// instance is then used only by its node's thread, and destroyed on the
// main thread after every node has finished.
//
// Errors: an exception from init(), zero_grad() or step() ends the run: the
// others' collectives throw AbortedError (comm.h), and the run fails with
// the first error, prefixed with the node, the step and the plugin.
#include <ATen/core/Tensor.h>

#include "exogym/sdk/state_dict.h"

namespace exogym::sdk {

class Model;
struct NodeContext;

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Once per node, on its thread, after the model is on its device and the
  // initial broadcast gave every node node 0's parameters and buffers, and
  // before step 0. It may call collectives (every node calls init). `ctx`
  // and `model` outlive the strategy.
  virtual void init(NodeContext& ctx, Model& model) = 0;

  // First thing of every step (after the step's evaluation, if any), before
  // the backward passes of the step's micro-batches: clears the gradients.
  virtual void zero_grad() = 0;

  // Before each step: whether the node computes it. False: it idles (no
  // batch, zero_grad, forward, backward or compute time) and step() still
  // runs, with no gradients, to communicate (FedProx's partial work).
  virtual bool computes() const { return true; }

  // Once per step, after the backward passes: param.grad() holds the node's
  // gradient averaged over its micro-batches (undefined for a parameter that
  // got none). ctx.step is the 0-based index of this step. What it sends
  // through ctx.comm is metered as the strategy's traffic. When it returns,
  // the runtime releases the gradients (param.grad() becomes undefined), so
  // that a node between steps holds none: keep no gradient tensor across
  // steps, copy what must outlive the step.
  virtual void step() = 0;

  // The learning rate of the last step, read on node 0's thread after each
  // step for train.csv and the progress line. Optional (default 0).
  virtual double lr() const { return 0.0; }

  // Checkpoints (docs/checkpoints.md): the state that, with the model's
  // parameters and buffers, continues the run exactly as if it had not
  // stopped: optimizer moments (sdk/optim_state.h), master copies, error
  // feedback, generators. Nothing that follows from ctx.step and ctx.seed
  // (an LR schedule's position, seeded selections) needs saving. save_state
  // is called on the node's thread at a step boundary (after step() of the
  // checkpoint's last step, before the next zero_grad()); the tensors it
  // puts in `out` may alias live state, since they are written out before
  // the next step. When a run resumes, the runtime restores the parameters
  // and buffers, calls init(), then load_state with what save_state saved,
  // on the node's thread, before the first resumed step. Neither may call
  // collectives. Errors are sdk::Error. Optional (default: no state).
  virtual void save_state(StateDict& /*out*/) const {}
  virtual void load_state(const StateDict& /*in*/) {}

  // Failures (docs/simulation.md#failures-and-churn). A node that rejoins
  // (or joins late) has lost its memory, as a restarted machine would: it
  // receives the current state from a live node, the donor (the lowest rank
  // alive both before and after the step it comes back at). The runtime
  // calls recovery_state on the donor, sends what it puts in `out` to each
  // node that comes back (counted as recovery traffic) and calls
  // load_recovery_state there, each on its node's thread at the step
  // boundary, before the step's evaluation. No collectives. The donor's
  // tensors are copied before it goes on.
  //
  // Default: the model's parameters and buffers ("model.<name>") and
  // everything save_state() saves ("state.<key>"): the node becomes a copy
  // of the donor. Override to send less, e.g. DiLoCo sends its master copy
  // and outer state and the node restarts its inner steps from the master.
  virtual void recovery_state(Model& model, StateDict& out) const;
  virtual void load_recovery_state(Model& model, const StateDict& in);

  // State that is the client's rather than the node's: an error-feedback
  // residual, SCAFFOLD's control variate
  // (docs/plugins.md#state-that-belongs-to-a-client). With participation a
  // node takes on a client after load_recovery_state gave it the run's
  // state; if has_client_state(), the client's own part is kept between its
  // rounds, on the client's side (no bytes on the network):
  // save_client_state on a node whose client leaves it (at the round's
  // start, before the membership changes; the tensors are copied to the
  // CPU), load_client_state on a node that takes a client on, after
  // load_recovery_state, with what that client's last save stored (empty
  // for a client that has not trained yet: start it from none). On the
  // node's thread, no collectives; sdk::Error for a state that does not
  // fit. The store is part of checkpoints. Without participation nothing
  // is called: every node is its own client all run long.
  virtual bool has_client_state() const { return false; }
  virtual void save_client_state(StateDict& /*out*/) const {}
  virtual void load_client_state(const StateDict& /*in*/) {}
};

// The model's part of a recovery state, for overrides of the functions
// above: its buffers and, with `parameters`, its parameters, under
// "model.<name>" (the tensors alias the model's). Loading copies them back
// and throws sdk::Error naming a tensor the donor did not send.
void save_model_tensors(Model& model, StateDict& out, bool parameters = true);
void load_model_tensors(Model& model, const StateDict& in, bool parameters = true);

}  // namespace exogym::sdk
