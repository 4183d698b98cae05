#pragma once
// The node's half of an asynchronous strategy (sdk/async.h) that works in
// rounds: the node takes its round's local steps, sends what the strategy
// makes of them to the process's server, waits for the reply and continues
// from the model in it. async_diloco.h and fedbuff.h say what travels and
// what the server does with it.
//
// Rounds: "H" local steps for the fastest node; with dynamic local updates
// (Liu et al. 2024) a node of relative speed s takes max(1, round(H·s)), so
// that every node's round takes about the same simulated time.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exogym/sdk/async.h"
#include "exogym/sdk/compose.h"
#include "exogym/sdk/state_dict.h"

namespace exogym::modules {

class AsyncRounds : public sdk::CommunicationModule {
 public:
  // Options "H" and "dynamic_local_updates", with the strategy's defaults,
  // for its specs(); the constructor below reads them.
  static sdk::OptionSpecs round_specs(int64_t default_H, bool default_dynamic);
  explicit AsyncRounds(const sdk::ModuleOptions& options);

  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;

  // "<prefix>taken": the steps taken in the current round; "<prefix>base.<i>":
  // the model the round started from. (The server's state and the update
  // in flight are the runtime's to save: sdk::AsyncServer::save_state.)
  void save_state(sdk::StateDict& out, const std::string& prefix) const override;
  void load_state(const sdk::StateDict& in, const std::string& prefix) override;

 protected:
  // The process's server, made once (sdk::shared_in_process) from the
  // initial parameters every node holds.
  virtual std::shared_ptr<sdk::AsyncServer> make_server(sdk::NodeContext& ctx,
                                                        const std::vector<at::Tensor>& params) = 0;
  // What the node sends at the end of a round: `params` (this node's) and
  // `base` (the model the round started from).
  virtual std::vector<at::Tensor> update(const std::vector<at::Tensor>& params,
                                         const std::vector<at::Tensor>& base) = 0;

 private:
  void take(const sdk::AsyncReply& reply);

  int64_t H_;
  bool dynamic_;
  int64_t round_steps_ = 0, taken_ = 0;
  std::vector<at::Tensor> params_;  // this node's trainable parameters
  std::vector<at::Tensor> base_;    // the model its round started from
};

// Copies of `tensors` (a server's model, what it replies).
std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors);

}  // namespace exogym::modules
