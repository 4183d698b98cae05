#pragma once
// Asynchronous DiLoCo (Liu et al. 2024, "Asynchronous Local-SGD Training for
// Language Modeling"): every node sends its pseudo-gradient base - params at
// the end of its round, and the server takes an outer step with each one as
// it arrives, never waiting for the others; the node continues from the
// server's model. Dynamic local updates (async_rounds.h) give slower nodes
// shorter rounds.
//
// The outer step is delayed Nesterov: each pseudo-gradient g moves the
// model at once by -(lr / N)·g, and every N-th update the momentum
// m = momentum·m + (the sum of the last N pseudo-gradients) / N moves it by
// -lr·momentum·m. With N = 1 that is Nesterov SGD step by step; with N = K
// nodes whose updates start from one model it is DiLoCo's outer Nesterov
// step on their average (the test checks both).
//
// Options: "H", "dynamic_local_updates", "outer_lr", "outer_momentum",
// "delay" (N; null: the number of nodes). Server state (checkpoints):
// "model.<i>", "momentum.<i>", "pending.<i>" (the pseudo-gradients since
// the last momentum step) and "version".
#include <cstdint>
#include <optional>

#include "exogym/modules/async/async_rounds.h"

namespace exogym::modules {

class AsyncDiLoCoModule final : public AsyncRounds {
 public:
  static sdk::ModuleSpecs specs();
  explicit AsyncDiLoCoModule(const sdk::ModuleOptions& options);

 private:
  std::shared_ptr<sdk::AsyncServer> make_server(sdk::NodeContext& ctx, const std::vector<at::Tensor>& params) override;
  std::vector<at::Tensor> update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& base) override;

  double lr_, momentum_;
  std::optional<int64_t> delay_;
};

}  // namespace exogym::modules
