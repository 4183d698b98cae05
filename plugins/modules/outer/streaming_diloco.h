#pragma once
// Streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512): DiLoCo whose
// parameters are cut into P fragments (fragments.h) that synchronise on a
// staggered schedule, so that a step sends one fragment instead of the
// whole model: the same bytes in total, a peak P times lower.
//
// Schedule. Counting t = step + 1 inner steps, fragment p sends after the
// inner steps t = o_p + k H (k = 0, 1, ...; t >= 1), with the offsets
// o_p = floor(p H / P) spread evenly over [0, H): fragment 0 syncs where
// DiLoCo does (t = H, 2H, ...), fragment p > 0 first after o_p steps. In
// T = n H steps every fragment syncs n times, as DiLoCo's whole model does.
// Offsets coincide only when P > H.
//
// One sync of fragment p, sent after step s (0-based) and applied after
// step s + tau (tau = 0: the same step):
//   at s          every node sends its fragment: with quantize "none" an
//                 all_reduce (Avg) of its parameters, as DiLoCo's; with a
//                 low-bit format the outer gradient master_p - local_p
//                 through compressed_mean_async with a QuantizeCompressor
//                 ("collective": a low-bit reduce-scatter, or an all-gather
//                 of the payloads), with error feedback around it when
//                 "error_feedback" > 0 (the compression library's one way).
//   at s + tau    the outer optimizer steps master_p along the average's
//                 pseudo-gradient (master_p - average, or the mean outer
//                 gradient), once per process (outer_master.h); then every
//                 node mixes: local_p = alpha local_p + (1 - alpha) master_p,
//                 local_p having taken tau more inner steps meanwhile.
// alpha = 0 replaces the fragment by the new master (DiLoCo's rule, the
// paper's and torchft's default); with P = 1, tau = 0, alpha = 0 and no
// quantisation the module is DiLoCo, bit for bit.
//
// Overlap: the collective is non-blocking (sdk/pending.h): sent at s, it is
// waited for at s + tau, so on the simulated clock the transfer runs behind
// the tau inner steps between and a node waits only for what is left then
// (tau = 0: at once, as a blocking call). A sync whose s + tau is past the
// run's last step is not applied: it lands after the last checkpoint, which
// keeps it in flight, so a run extended from there (--set train.max_steps)
// applies it on schedule, bit for bit and clock included.
//
// Communicates only with more than one node (one node: local training).
// Options: specs(). State: per fragment p, under "fragment.<p>.", the
// master and outer state (outer_master.h), and while a sync is in flight
// "pending_step" and under "pending." the collective's handle (Pending::
// save: what it brought and where its transfer stands on the clock, kept per
// node: a resumed run applies it at pending_step + tau, bit for bit), and
// with error feedback the node's residuals under "residual.<i>". A node
// that comes back after a failure receives the masters, the outer states
// and what is in flight (not the residuals: it starts without), and
// restarts its inner steps from the masters (as DiLoCo's does).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/modules/compression/error_feedback.h"
#include "exogym/modules/compression/quantize_compressor.h"
#include "exogym/modules/outer/fragments.h"
#include "exogym/modules/outer/outer_master.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/pending.h"
#include "exogym/sdk/quantize.h"
#include "exogym/sdk/quantized_comm.h"

namespace exogym::modules {

class StreamingDiLoCoModule final : public sdk::CommunicationModule {
 public:
  // Options "H", "fragments", "tau", "alpha", "quantize", "collective", "error_feedback"
  // and "outer_optimizer" (DiLoCo's).
  static sdk::ModuleSpecs specs();
  // The values "quantize" takes: "none" and sdk::quant_format_names().
  static std::vector<std::string> quantize_names();

  // Reads the options; sdk::ConfigError at the option for tau >= H, alpha
  // outside [0, 1], an unknown format, an error_feedback outside [0, 1] or
  // without a format, or a "fragments" of another form.
  explicit StreamingDiLoCoModule(const sdk::ModuleOptions& validated_options);
  ~StreamingDiLoCoModule() override;

  // Cuts the model into fragments: sdk::ConfigError at "fragments" for more
  // fragments than tensors, or patterns that leave a tensor out.
  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;
  bool recovers_model() const override { return false; }
  void recovery_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in, const std::string& prefix) override;

  // The fragments (positions in sdk::trainable_parameters), after init().
  const Fragments& fragments() const { return cut_; }
  // The 0-based step after which fragment p first sends: o_p - 1, or H - 1
  // when o_p = 0.
  int64_t first_send(size_t p) const;

 private:
  struct Fragment {
    std::vector<at::Tensor> params;  // this node's tensors of the fragment
    std::shared_ptr<OuterMaster> outer;
    int64_t pending_step = -1;  // the step of the sync in flight, -1 for none
    // The sync in flight: the average of the parameters (quantize "none")
    // or the low-bit mean of the outer gradients.
    sdk::Pending sync;
    // What quantising this node's outer gradients lost (error_feedback > 0).
    std::unique_ptr<ErrorFeedback> feedback;
  };
  void send(sdk::NodeContext& ctx, Fragment& f, int64_t step);
  void apply(sdk::NodeContext& ctx, Fragment& f, size_t p, int64_t step);
  // What the sync in flight brought (waiting for it), as OuterMaster::step
  // takes it.
  std::vector<at::Tensor> receive(Fragment& f);
  // The steps that follow from the step a node comes back at (recovery):
  // fragment p's last outer step before `step`, and the send whose result
  // is still in flight at `step` (-1 for none).
  int64_t last_apply_before(size_t p, int64_t step) const;
  int64_t in_flight_at(size_t p, int64_t step) const;
  void load_fragments(const sdk::StateDict& in, const std::string& prefix, const std::vector<int64_t>& outer_steps,
                      const std::vector<int64_t>& pending_steps);

  int64_t H_, tau_;
  double alpha_;
  nlohmann::json fragments_option_;
  std::optional<QuantizeCompressor> quantizer_;  // none: exact all_reduce
  sdk::QuantCollective collective_ = sdk::QuantCollective::ReduceScatter;
  float feedback_decay_ = 0;  // 0: no error feedback
  sdk::OptimizerSpec outer_spec_;
  const sdk::NodeContext* ctx_ = nullptr;
  Fragments cut_;
  std::vector<Fragment> fragments_;
};

}  // namespace exogym::modules
