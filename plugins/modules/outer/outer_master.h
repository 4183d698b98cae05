#pragma once
// DiLoCo's outer half, shared by the modules that take outer steps
// (diloco.h, streaming_diloco.h): a master copy of a list of parameters and
// the outer optimizer that steps it along a pseudo-gradient. The master and
// the outer optimizer are the same on every live node (they start from the
// initial broadcast and take the same step from the same collective's
// result), so a process keeps one OuterMaster per list (sdk/shared.h),
// stepped by the first of its nodes to get to the outer step.
//
// State, under the caller's prefix: "master.<i>", the outer optimizer's
// "outer.<i>.<field>" (sdk::save_optimizer_state) and "outer_step", the
// step of the last outer step (-1 before the first). A process loads the
// freshest state its nodes hold, since a node whose process had no live
// node at the last outer steps holds an older one.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exogym/sdk/node.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/strategy.h"

namespace torch::optim {
class Optimizer;
}

namespace exogym::modules {

class OuterMaster {
 public:
  // What a collective brought to step the master with.
  enum class Received {
    Average,         // the nodes' mean parameters: the pseudo-gradient is master - average (DiLoCo)
    PseudoGradient,  // the nodes' mean of master - parameters, already formed (a quantised exchange)
  };

  // This node's next master under `key` (sdk::shared_in_process): the one
  // the first node of the process to ask made, from copies of `params`.
  // From a module's init(), when every node holds the same parameters.
  static std::shared_ptr<OuterMaster> in_process(sdk::NodeContext& ctx, const std::string& key,
                                                 const std::vector<at::Tensor>& params,
                                                 const sdk::OptimizerSpec& outer);
  OuterMaster(const std::vector<at::Tensor>& params, const sdk::OptimizerSpec& outer);
  ~OuterMaster();

  // The outer step of `step`, once for the process: the first node to call
  // it with a new `step` sets the master's gradient from `received` (in the
  // master's order) and steps the outer optimizer; the others find it done.
  // Every node of the process calls it after the same collective.
  void step(int64_t step, const std::vector<at::Tensor>& received, Received kind);

  // params[i] = alpha * params[i] + (1 - alpha) * master[i]; with alpha 0 a
  // copy, bit for bit (never the master itself: the reference aliased the
  // master's storage on CPU, docs/differences.md#training-and-strategies,
  // so later inner steps moved the master and every later pseudo-gradient
  // was 0).
  void mix_into(const std::vector<at::Tensor>& params, double alpha) const;

  // The last outer step's result, in the order of the parameters given.
  const std::vector<at::Tensor>& master() const { return master_; }
  // The last outer step's metrics: the pseudo-gradient's global L2 norm and
  // the outer learning rate (read only: the trained values do not depend on
  // them).
  double pseudo_grad_norm() const { return pseudo_grad_norm_; }
  double outer_lr() const { return outer_lr_; }

  void save(sdk::StateDict& out, const std::string& prefix) const;
  // Loads the master and the outer optimizer, which stand at `outer_step`,
  // from `in`, unless the process holds as fresh a state already. Throws
  // sdk::Error naming a missing key.
  void load(const sdk::StateDict& in, const std::string& prefix, int64_t outer_step);

 private:
  // Guards the outer step and loads; between them every node only reads the
  // master, and the next outer step waits for every live node's collective,
  // which each node joins only after its reads.
  std::mutex mutex_;
  std::vector<at::Tensor> master_;
  std::unique_ptr<torch::optim::Optimizer> outer_;
  int64_t outer_step_ = -1;  // the step whose outer step the master holds
  // The master is still the parameters it was made from: right at a fresh
  // start, to be replaced when a resumed run loads its state.
  bool from_init_ = true;
  double pseudo_grad_norm_ = 0, outer_lr_ = 0;
};

}  // namespace exogym::modules
