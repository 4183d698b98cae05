#pragma once
// NoLoCo's communication (Kolehmainen et al. 2025, arXiv 2506.10911): no
// all-reduce. After every H local (inner) steps each node pairs with one
// other live node, drawn from the run's seed and the round (a random
// perfect matching of the live nodes, the same on every node; with an odd
// count the last node of the draw sits the round out), exchanges its slow
// weights phi and its outer gradient delta = theta - phi with it, and takes
// the modified Nesterov outer step of the paper's reference code:
//
//   m     <- alpha m + beta mean(delta) + gamma (mean(phi) - phi)
//   phi   <- phi + m
//   theta <- phi
//
// where mean() is over the pair (in rank order: the same bits on both),
// alpha = outer_momentum, beta = outer_lr, gamma = gamma (default: beta, as
// the reference code). The gamma term pulls the pair's slow weights
// together: nothing else keeps the replicas from drifting apart. A node
// without a partner (odd count, or alone) steps with its own phi and delta.
//
// Communicates: one exchange (sdk/comm.h) of 2 x the trainable parameters
// with the partner after steps H-1, 2H-1, ... (0-based).
// Options: "H", "outer_lr", "outer_momentum", "gamma" (specs()).
// State: per node, phi ("<prefix>slow.<i>") and m ("<prefix>momentum.<i>");
// a node that comes back takes its donor's (and the donor's parameters).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/sdk/compose.h"

namespace exogym::modules {

class NoLoCoModule final : public sdk::CommunicationModule {
 public:
  // "NoLoCoModule": options "H", "outer_lr", "outer_momentum" and "gamma".
  static sdk::ModuleSpecs specs();

  explicit NoLoCoModule(const sdk::ModuleOptions& options);
  // gamma: nullopt uses outer_lr. outer_momentum must lie in [0, 1)
  // (sdk::ConfigError at "outer_momentum" otherwise).
  NoLoCoModule(int64_t H, double outer_lr, double outer_momentum, std::optional<double> gamma);

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;

  // The partner of `rank` in round `round` among the `live` ranks
  // (ascending), or -1 for the node left out of an odd count: a seeded
  // random permutation of the live nodes, cut into consecutive pairs.
  static int partner(uint64_t run_seed, int64_t round, const std::vector<int>& live, int rank);

  const std::vector<at::Tensor>& slow() const { return slow_; }
  const std::vector<at::Tensor>& momentum() const { return momentum_; }

 private:
  int64_t H_;
  double outer_lr_, outer_momentum_, gamma_;
  std::vector<at::Tensor> params_;    // theta: this node's trainable parameters
  std::vector<at::Tensor> slow_;      // phi: the last outer step's result
  std::vector<at::Tensor> momentum_;  // m
};

}  // namespace exogym::modules
