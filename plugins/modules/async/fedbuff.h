#pragma once
// FedBuff (Nguyen et al. 2022, "Federated Learning with Buffered
// Asynchronous Aggregation"): every node sends its model at the end of its
// round; the server buffers the updates params - base, each weighted by
// (1 + staleness)^-staleness_exponent, and once it holds `buffer` of them
// moves its model by server_lr · (their weighted sum) / buffer. A node gets
// the server's current model back at once, without waiting for the buffer
// to fill.
//
// When every buffered update starts from the server's current model with
// the same weight and server_lr is 1, the new model is the plain mean of
// the nodes' models, summed in arrival order: the same number in exact
// arithmetic, and with equally fast nodes and a buffer of all K nodes
// exactly what synchronous FedAvg computes, bit for bit (the test).
//
// Options: "H", "dynamic_local_updates" (async_rounds.h; default false, as
// in the paper), "buffer" (null: the number of nodes; at most that),
// "server_lr", "staleness_exponent". Server state (checkpoints): "version",
// the models some node's round started from ("model.<version>.<i>"), each
// node's last version ("bases": rank, version pairs) and the buffered
// updates ("held.<k>.<i>", "held_bases", "held_weights").
#include <cstdint>
#include <optional>

#include "exogym/modules/async/async_rounds.h"

namespace exogym::modules {

class FedBuffModule final : public AsyncRounds {
 public:
  static sdk::ModuleSpecs specs();
  explicit FedBuffModule(const sdk::ModuleOptions& options);

 private:
  std::shared_ptr<sdk::AsyncServer> make_server(sdk::NodeContext& ctx, const std::vector<at::Tensor>& params) override;
  std::vector<at::Tensor> update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& base) override;

  std::optional<int64_t> buffer_;
  double server_lr_, exponent_;
};

}  // namespace exogym::modules
