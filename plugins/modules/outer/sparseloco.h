#pragma once
// SparseLoCo (Sarfi, Thérien, Lidin and Belilovsky 2025, arXiv 2508.15706):
// DiLoCo whose pseudo-gradient is sparsified and quantised, with an error
// buffer per node that takes the place of DiLoCo's outer momentum.
//
// Every H inner steps (after 0-based steps H-1, 2H-1, ..., as DiLoCo), with
// θ the global parameters the round started from and θ_r node r's:
//   Δ_r = θ - θ_r                  node r's pseudo-gradient
//   e_r ← β e_r + Δ_r              its error buffer, decayed by β ("decay")
//   Δ̂_r = C(e_r)                   compressed: by default chunk-wise top-k,
//                                  the kept values quantised ("compressor",
//                                  "quantize"; topk_compressor.h)
//   e_r ← e_r - Δ̂_r                what was not sent (or lost) stays
//   Δ = (1/R) Σ_r Δ̂_r              compressed_mean (compressor.h)
//   θ ← θ - α Δ                    outer SGD with lr α ("outer_lr"), no momentum
// and every node continues from the new θ. The global θ is kept once per
// process (outer_master.h, an SGD outer optimizer without momentum); the
// error buffers are each node's own, fp32 on the CPU (an ErrorFeedback
// with the decay). The paper's SparseLoCo is the default compressor;
// "compressor" swaps in another of the library (random_k, sign, quantize:
// make_compressor.h), which makes this error-feedback DiLoCo with that
// compressor (EF-signSGD's outer step with "sign").
//
// Communicates: per outer step, compressed_mean of every trainable tensor
// (one all_gather, one all_reduce for random-k in fp32, or the low-bit
// reduce-scatter for the quantize compressor, "collective"); nothing with one
// node (local training, as DiLoCo). Random-k's shared seed for tensor i at
// outer step t is derive_seed(run seed, "SPLOCO", t * tensors + i). Options: specs(). State: outer_master.h's under the
// prefix (the global θ as "master.<i>", "outer_step") and the node's error buffers as "error.<i>". A node that comes
// back after a failure receives θ (not the buffers: it starts with empty ones, as a restarted machine would) and
// restarts its inner steps from it. With participation the buffers are the
// client's (Strategy::has_client_state): save_client_state/load_client_state
// carry them between the client's rounds.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/modules/compression/compressor.h"
#include "exogym/modules/compression/error_feedback.h"
#include "exogym/modules/compression/make_compressor.h"
#include "exogym/modules/outer/outer_master.h"
#include "exogym/sdk/compose.h"

namespace exogym::modules {

class SparseLoCoModule final : public sdk::CommunicationModule {
 public:
  // "SparseLoCoModule": options "H", "compressor", "chunk", "density",
  // "quantize", "offsets", "collective", "decay" and "outer_lr".
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

  // The error buffers as a client's state ("<prefix>error.<i>"); no such
  // keys (a client new to training) clears them. sdk::Error for a buffer of
  // another shape than its parameter.
  bool has_client_state() const override { return true; }
  void save_client_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_client_state(const sdk::StateDict& in, const std::string& prefix) override;

  const Compressor& compressor() const { return *compressor_; }
  // The shared seed tensor i is compressed with at 0-based outer step t.
  uint64_t shared_seed(int64_t outer_step, size_t i) const;
  // Node's error buffer i (fp32, CPU, shaped as trainable parameter i).
  at::Tensor error(size_t i) const { return errors_.residual(i); }
  // The global parameters θ (the last outer step's result).
  const std::vector<at::Tensor>& global() const { return outer_->master(); }

 private:
  // Replaces the error buffers with in's "<prefix>error.<i>" (none: empty).
  void load_errors(const sdk::StateDict& in, const std::string& prefix);

  int64_t H_;
  CompressorChoice choice_;
  std::shared_ptr<const Compressor> compressor_;
  sdk::QuantCollective collective_ = sdk::QuantCollective::ReduceScatter;
  double outer_lr_;
  const sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;      // this node's
  ErrorFeedback errors_;                // this node's e_r, one slot per parameter
  std::shared_ptr<OuterMaster> outer_;  // this process's θ
};

}  // namespace exogym::modules
