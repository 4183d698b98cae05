#pragma once
// Muon (Keller Jordan, 2024), the inner optimizer of MuLoCo (arXiv
// 2505.23725: DiLoCo with Muon inside). For every parameter of 2 or more
// dimensions, a "matrix" (a higher-dimensional tensor such as a conv weight
// is viewed as [size(0), the rest]):
//   B = momentum * B + G
//   U = G + momentum * B  with nesterov, else B
//   O = NewtonSchulz5(U)  the reference's quintic iteration, `ns_steps` times,
//                         coefficients (3.4445, -4.7750, 2.0315), on
//                         U / (||U||_F + 1e-7), transposed while rows > cols
//   p = p * (1 - lr * weight_decay) - lr * max(1, rows / cols)^0.5 * O
// The scale max(1, rows / cols)^0.5 is the reference implementation's, so
// that its learning rates carry over (not Moonlight's 0.2 * sqrt(max(rows,
// cols)), which matches AdamW's update RMS instead). Newton-Schulz runs in
// float32 whatever the parameter's type: the reference uses bfloat16 on the
// GPU, but float32 gives the same bits on every CPU run and resume.
//
// Every other parameter takes an AdamW step with its own hyper-parameters
// (adamw_lr, adamw_betas, adamw_eps, adamw_weight_decay), the same
// operations as torch::optim::AdamW's step, so the same bits: the vectors
// (biases, norms' gains) and the matrices that are no hidden layer's
// weights, the input embeddings and the output head, which the reference
// hands to AdamW by name. Which those are the model declares
// (Model::embedding_and_head_parameters); `adamw_params`, a list of name
// patterns, overrides it ([] orthogonalises every matrix).
//
// Learning-rate schedules: sdk::set_lr writes one "lr" into every param
// group, and the strategies schedule Muon's lr (OptimizerSpec::lr). So the
// options' `lr` is Muon's scheduled rate, `base_lr` the configured one, and
// the AdamW fallback uses adamw_lr * (lr / base_lr): a schedule scales both
// in proportion, through set_lr/get_lr unchanged, and at factor 1 the
// fallback's rate is exactly adamw_lr.
//
// State, checkpointed by optim_state.h: MuonParamState (momentum_buffer) for
// a matrix, LibTorch's AdamWParamState (step, exp_avg, exp_avg_sq) for the
// rest.
//
// Stacked (LocalStep::step_together): a Muon over [K, ...] stacks of K
// nodes' parameters steps every row as its node's Muon would. Everything but
// Newton-Schulz is elementwise, so the same bits; Newton-Schulz takes each
// node's matrix by itself on the CPU (the same bits too) and all K at once
// with batched products on a GPU, which round differently from K separate
// ones (docs/performance.md#where-stacked-rounding-differs).
//
// A detail of the SDK's optimizers, not part of the contract: not installed
// and on no plugin's include path. A plugin gets it from OptimizerSpec::build
// ("muon"), as a torch::optim::Optimizer.
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <vector>

namespace exogym::sdk {
class Model;
}

namespace exogym::sdk::internal {

struct MuonOptions : public torch::optim::OptimizerCloneableOptions<MuonOptions> {
  explicit MuonOptions(double learning_rate = 0.02) : lr(learning_rate), base_lr(learning_rate) {}

  double lr;       // Muon's, as scheduled (set_lr)
  double base_lr;  // Muon's, as configured: the schedule's factor is lr / base_lr
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  double weight_decay = 0;
  double adamw_lr = 3e-4;  // at base_lr; scaled with lr
  double adamw_beta1 = 0.9, adamw_beta2 = 0.95;
  double adamw_eps = 1e-8;
  double adamw_weight_decay = 0;

  double get_lr() const override { return lr; }
  void set_lr(const double value) override { lr = value; }
  // The fallback's rate at this step.
  // lr / base_lr is exactly 1 when lr is unscheduled: adamw_lr itself.
  double scheduled_adamw_lr() const { return adamw_lr * (lr / base_lr); }
};

struct MuonParamState : public torch::optim::OptimizerCloneableParamState<MuonParamState> {
  at::Tensor momentum_buffer;
};

class Muon : public torch::optim::Optimizer {
 public:
  // `adamw_matrices`: matrices of `params` that take AdamW's step.
  // `stacked`: every parameter is a stack of K nodes' along dimension 0
  // (above), a matrix when its rows are.
  Muon(const std::vector<at::Tensor>& params, const MuonOptions& options,
       const std::vector<at::Tensor>& adamw_matrices = {}, bool stacked = false);
  at::Tensor step(LossClosure closure = nullptr) override;

  // Whether `param` takes Muon's step (else AdamW's).
  bool orthogonalises(const at::Tensor& param) const {
    return param.dim() >= (stacked_ ? 3 : 2) && adamw_matrices_.count(param.unsafeGetTensorImpl()) == 0;
  }

 private:
  std::unordered_set<const c10::TensorImpl*> adamw_matrices_;
  bool stacked_;
  void matrix_step(const at::Tensor& param, const MuonOptions& o);
  void adamw_step(const at::Tensor& param, const MuonOptions& o);
};

// OptimizerSpec::build's "muon": from its validated hyper-parameters
// (optim.cpp's table, every one present), `model` the one whose parameters
// `params` are, or null (then only adamw_params' absence or [] is
// possible). Throws ConfigError at "optimizer" (or "optimizer.adamw_params")
// when no parameter is left to orthogonalise or a pattern matches no
// parameter; the runtime reports it under the plugin's options,
// "strategy.options.optimizer".
std::unique_ptr<torch::optim::Optimizer> build_muon(const nlohmann::json& hyper_parameters,
                                                    const std::vector<at::Tensor>& params, Model* model);

// The reference's quintic Newton-Schulz iteration on a 2-D float tensor:
// an approximately semi-orthogonal matrix of the same shape (its singular
// values near 1, in about [0.7, 1.2] after 5 steps). On a 3-D one, [K, rows,
// cols], each of the K matrices so, with batched products (bmm), which may
// round differently from the 2-D iteration of each.
at::Tensor newton_schulz5(const at::Tensor& update, int64_t steps);

}  // namespace exogym::sdk::internal
