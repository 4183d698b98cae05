#pragma once
// DiLoCo whose outer step overlaps the next H inner steps (Kale, Douillard
// and Donchev 2025, "Eager updates for overlapped communication and
// computation in DiLoCo", arXiv 2502.12996): a node sends its outer
// gradient and goes on training at once; the average arrives while it
// computes and is used at the next sync, one outer step late.
//
// Round r (the H inner steps that end after step rH - 1, 0-based) starts
// from this node's master θ_{r-1}. At its end the node forms its outer
// gradient d_r = θ_{r-1} - local, starts a non-blocking all_reduce (Avg) of
// it (sdk/pending.h), waits for the previous round's, D_{r-1} (0 before the
// second round), and steps its master with the outer optimizer along
//   "delayed":  D_{r-1}, the paper's naive one-step delay: the same on
//               every node, so the process keeps one master (outer_master.h);
//               a round's work enters the master one round late.
//   "eager":    D_{r-1} + (d_r - d_{r-1}) / K, the paper's eager update: the
//               node's own part of the late average replaced by its fresh
//               outer gradient, as a proxy for the average not yet known.
//               The proxy differs from node to node, so each node keeps its
//               own master and outer state.
// Then the node continues from its master. On the simulated clock each
// round's transfer runs behind the next H inner steps: a node waits only
// when it takes longer than they do. The bytes are DiLoCo's (one all_reduce
// of every trainable parameter per round). The last round's average lands
// after the last checkpoint, which keeps it in flight, so a run extended
// from there (--set train.max_steps) uses it on schedule.
//
// Communicates only with more than one node (one node: local training).
// Options: "H", "update" and "outer_optimizer" (DiLoCo's). State, under the
// module's prefix: outer_master.h's ("master.<i>", "outer.<i>.<field>",
// "outer_step"), "own.<i>" (eager: d_r of the last round) and the average in
// flight under "pending." (Pending::save). A node that comes back after a failure receives its
// donor's state (its own outer gradient included, as the proxy for the one
// it lost) and restarts its inner steps from that master.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/modules/outer/outer_master.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/pending.h"

namespace exogym::modules {

class OverlappedDiLoCoModule final : public sdk::CommunicationModule {
 public:
  enum class Update { Delayed, Eager };

  // "OverlappedDiLoCoModule": options "H", "update" and "outer_optimizer".
  static sdk::ModuleSpecs specs();

  explicit OverlappedDiLoCoModule(const sdk::ModuleOptions& validated_options);
  ~OverlappedDiLoCoModule() override;

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;
  bool recovers_model() const override { return false; }
  void recovery_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in, const std::string& prefix) override;

  // This node's master (the last outer step's result), in the order of
  // sdk::trainable_parameters().
  const std::vector<at::Tensor>& master() const { return outer_->master(); }

 private:
  // The outer gradient this node's master steps along at the sync of
  // `step`, from the late average (null before the second round) and this
  // round's own outer gradient.
  std::vector<at::Tensor> outer_gradient(const sdk::SharedTensors& late, const std::vector<at::Tensor>& own) const;
  // The late average: what the last sync's collective brought.
  sdk::SharedTensors receive();
  void load(const sdk::StateDict& in, const std::string& prefix, int64_t outer_step);

  int64_t H_;
  Update update_;
  sdk::OptimizerSpec outer_spec_;
  const sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;      // this node's
  std::shared_ptr<OuterMaster> outer_;  // the process's (delayed) or this node's (eager)
  std::vector<at::Tensor> own_;         // eager: this node's outer gradient of the last round (empty before)
  sdk::Pending in_flight_;              // the average of the last round's outer gradients
};

}  // namespace exogym::modules
