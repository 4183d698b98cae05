// Strategy "desloc": DES-LOC (Iacob et al. 2025, "DES-LOC: Desynced Low
// Communication Adaptive Optimizers", arXiv 2505.22549). Every node runs
// Adam (or AdamW) on its own data; the parameters and each of Adam's two
// moments are averaged over the nodes on periods of their own, the moments
// less often since they change more slowly (the paper's K_u = 3 K_x, K_v =
// 6 K_x). With K_x = K_u = K_v it is Local Adam; with the moments never
// averaged it is FedAvg with Adam (tested bit for bit).
//
// After the local step of 0-based step s, with t = s + 1:
//   t % Kx == 0: θ_r ← mean over the nodes of θ_r
//   t % Ku == 0: m_r ← mean of m_r   (Adam's exp_avg)
//   t % Kv == 0: v_r ← mean of v_r   (Adam's exp_avg_sq)
// in one all_reduce (Avg) of whichever are due, parameters first. The paper
// averages each moment just before the step that uses it; averaging it
// right after the step before is the same. Adam's step counter is the same
// on every node; amsgrad's max_exp_avg_sq is not averaged.
//
// State: the local optimizer's (a checkpoint holds every node's moments);
// the periods follow from the step. A node that comes back after a failure
// takes a live node's parameters and moments.
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <limits>
#include <string>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/optim_state.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/stacked.h"

namespace exogym::plugins {

using sdk::OptionSpec;
using sdk::OptionType;

constexpr uint64_t kMaxPeriod = std::numeric_limits<int>::max();

static sdk::ModuleSpecs desloc_specs() {
  return {"DesLoc",
          {
              // Periods fit an int, so that the defaults 3 Kx and 6 Kx cannot
              // overflow (Kx = INT64_MAX made Kv -6).
              OptionSpec{"Kx",
                         OptionType::PositiveInteger,
                         16,
                         "average the parameters after every Kx-th local step",
                         {},
                         false,
                         kMaxPeriod},
              OptionSpec{"Ku",
                         OptionType::PositiveInteger,
                         nullptr,
                         "average Adam's first moment (exp_avg) after every Ku-th local step (null: 3 Kx, the paper's "
                         "recommendation)",
                         {},
                         false,
                         kMaxPeriod},
              OptionSpec{"Kv",
                         OptionType::PositiveInteger,
                         nullptr,
                         "average Adam's second moment (exp_avg_sq) after every Kv-th local step (null: 6 Kx)",
                         {},
                         false,
                         kMaxPeriod},
          }};
}

class DesLocStrategy final : public sdk::Strategy {
 public:
  explicit DesLocStrategy(const nlohmann::json& options)
      : local_(with_adam(sdk::LocalStepOptions::from_json(options))),
        Kx_(options.at("Kx").get<int64_t>()),
        Ku_(options.at("Ku").is_null() ? 3 * Kx_ : options.at("Ku").get<int64_t>()),
        Kv_(options.at("Kv").is_null() ? 6 * Kx_ : options.at("Kv").get<int64_t>()) {}

  static sdk::OptionSpecs specs() { return sdk::compose_specs({desloc_specs(), sdk::LocalStepOptions::specs()}); }

  void init(sdk::NodeContext& ctx, sdk::Model& model) override {
    ctx_ = &ctx;
    local_.init(ctx, model);
    // The optimizer's state is keyed by the parameters the local step steps.
    params_ = local_.parameters();
  }

  void zero_grad() override {
    local_.zero_grad();
    // step() takes the local step first: a stack may take it right after
    // the backward (sdk/stacked.h).
    if (ctx_->stack) ctx_->stack->take_after_backward(local_);
  }
  double lr() const override { return local_.lr(); }
  // The local optimizer's state (Adam's moments); a node that comes back
  // after a failure receives it with the parameters (Strategy's default).
  void save_state(sdk::StateDict& out) const override { local_.save_state(out, "local."); }
  void load_state(const sdk::StateDict& in) override { local_.load_state(in, "local."); }

  void step() override {
    local_.step();
    const int64_t t = ctx_->step + 1;
    // Over the live nodes (all of them unless the run simulates failures):
    // one has nobody to average with.
    if (ctx_->live_count() == 1) return;
    std::vector<at::Tensor> due;
    auto add = [&](const std::vector<at::Tensor>& tensors) {
      for (const auto& tensor : tensors) {
        // Every node stepped every parameter with a gradient; one without
        // (unused this step on every node, as the model is the same) has
        // no state on any node.
        if (tensor.defined()) due.push_back(tensor);
      }
    };
    if (t % Kx_ == 0) {
      for (const auto& p : params_) due.push_back(p.detach());
    }
    if (t % Ku_ == 0) add(sdk::optimizer_state_tensors(local_.optimizer(), params_, "exp_avg"));
    if (t % Kv_ == 0) add(sdk::optimizer_state_tensors(local_.optimizer(), params_, "exp_avg_sq"));
    if (due.empty()) return;
    at::NoGradGuard no_grad;
    ctx_->communicator().all_reduce(due, sdk::ReduceOp::Avg);
  }

 private:
  // `local`, once its optimizer is known to keep Adam's moments.
  static sdk::LocalStepOptions with_adam(sdk::LocalStepOptions local) {
    const std::string& name = local.optimizer.name;
    if (name != "adam" && name != "adamw") {
      throw sdk::ConfigError("optimizer",
                             "DES-LOC synchronises Adam's moments: expected adam or adamw, got \"" + name + "\"");
    }
    return local;
  }

  sdk::LocalStep local_;
  int64_t Kx_, Ku_, Kv_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("desloc", "1.0.0", exogym::plugins::DesLocStrategy, exogym::plugins::DesLocStrategy::specs)
