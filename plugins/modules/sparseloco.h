#pragma once
// SparseLoCo (Sarfi, Thérien, Lidin and Belilovsky 2025, arXiv 2508.15706):
// DiLoCo whose pseudo-gradient is sparsified and quantised, with an error
// buffer per node that takes the place of DiLoCo's outer momentum.
//
// Every H inner steps (after 0-based steps H-1, 2H-1, ..., as DiLoCo), with
// θ the global parameters the round started from and θ_r node r's:
//   Δ_r = θ - θ_r                  node r's pseudo-gradient
//   e_r ← β e_r + Δ_r              its error buffer, decayed by β ("decay")
//   Δ̂_r = Q(TopK_chunk(e_r))       chunk-wise top-k, then the kept values
//                                  quantised ("quantize"; sparse_average.h)
//   e_r ← e_r - Δ̂_r                what was not sent (or lost) stays
//   Δ = (1/R) Σ_r Δ̂_r              the sparse average (sparse_average.h)
//   θ ← θ - α Δ                    outer SGD with lr α ("outer_lr"), no momentum
// and every node continues from the new θ. The global θ is kept once per
// process (outer_master.h, an SGD outer optimizer without momentum); the
// error buffers are each node's own, fp32 on the CPU.
//
// Communicates: one all_gather per outer step of every trainable tensor's
// (offsets, values[, scales]); nothing with one node (local training, as
// DiLoCo). Options: specs(). State: outer_master.h's under the prefix
// (the global θ as "master.<i>", "outer_step") and the node's error
// buffers as "error.<i>". A node that comes back after a failure receives
// θ (not the buffers: it starts with empty ones, as a restarted machine
// would) and restarts its inner steps from it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/modules/outer_master.h"
#include "exogym/modules/sparse_average.h"
#include "exogym/sdk/compose.h"

namespace exogym::modules {

class SparseLoCoModule final : public sdk::CommunicationModule {
 public:
  // "SparseLoCoModule": options "H", "chunk", "density", "quantize",
  // "decay" and "outer_lr".
  static sdk::ModuleSpecs specs();
  // The values "quantize" takes: "none" and sdk::quant_format_names().
  static std::vector<std::string> quantize_names();

  // Reads the options; sdk::ConfigError at "decay" outside [0, 1] and at
  // "quantize" for an unknown format.
  explicit SparseLoCoModule(const sdk::ModuleOptions& validated_options);
  ~SparseLoCoModule() override;

  // sdk::ConfigError at "chunk" when it is larger than the model's largest
  // trainable tensor (no tensor would fill one chunk).
  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;
  bool recovers_model() const override { return false; }
  void recovery_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_recovery_state(sdk::Model& model, const sdk::StateDict& in, const std::string& prefix) override;

  const SparseFormat& format() const { return format_; }
  // Node's error buffer i (fp32, CPU, shaped as trainable parameter i).
  const at::Tensor& error(size_t i) const { return errors_.at(i); }
  // The global parameters θ (the last outer step's result).
  const std::vector<at::Tensor>& global() const { return outer_->master(); }

 private:
  void clear_errors();

  int64_t H_;
  SparseFormat format_;
  float decay_;
  double outer_lr_;
  const sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;      // this node's
  std::vector<at::Tensor> errors_;      // this node's e_r, one per parameter
  std::shared_ptr<OuterMaster> outer_;  // this process's θ
};

}  // namespace exogym::modules
