#pragma once
// SPARTA's communication (sparse parameter averaging): after a local step, a
// small subset of every parameter's elements (a fraction p) is replaced by
// its mean over the nodes. Every node selects the same elements from the
// run's seed (index_selector.h), so only the selected values travel.
//
// Communicates: one all_reduce (Avg) of the selected values after every
// step t with t % interval == 0 (0-based); nothing with one node.
// Options: "p", "selector" and "sparta_interval" (specs()).
// State: none to save. The selection at step t depends only on the run's
// seed and t, so a resumed run selects what an uninterrupted one would; the
// nodes of a process draw it once and share it, with the selector's cached
// permutations (sdk/shared.h).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/modules/aggregation/index_selector.h"
#include "exogym/sdk/compose.h"

namespace exogym::modules {

class SpartaModule final : public sdk::CommunicationModule {
 public:
  // "SpartaModule": options "p", "selector" and "sparta_interval".
  static sdk::ModuleSpecs specs();

  // Throws sdk::ConfigError for an unknown selector or p outside (0, 1].
  explicit SpartaModule(const sdk::ModuleOptions& options);
  // Averages after steps t with t % interval == 0.
  SpartaModule(double p, std::string selector, int64_t interval = 1);

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;

 private:
  double p_;
  std::string selector_name_;
  int64_t interval_;
  struct Shared;
  // This call's indices, one per parameter: drawn by the first node of the
  // process to ask, the same tensors for the others.
  std::vector<at::Tensor> indices(int64_t call);
  std::shared_ptr<Shared> shared_;
  std::vector<at::Tensor> params_;
};

}  // namespace exogym::modules
