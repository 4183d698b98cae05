#pragma once
// Asynchronous strategies (docs/plugins.md#asynchronous-strategies): each
// node trains at its own simulated speed, sends its update to a server when
// it is done with a round, and waits only for the server's reply, never for
// the other nodes. The server applies the updates in the order they arrive
// on the simulated clock, ties in rank order, so a run is the same every
// time whatever the threads do.
//
// A strategy that is asynchronous, in init():
//
//   auto server = sdk::shared_in_process<MyServer>(ctx, "my.server", [&] { ... });
//   ctx.async->connect(server, [this](const sdk::AsyncReply& r) { ... });
//
// and in step(), when its round is done: ctx.async->send(update). From then
// on the node computes nothing until the reply arrives; the runtime hands it
// to the handler on the node's thread before the node's next step.
//
// The simulated clock: every step takes compute.step_time / speed (the
// manifest must fix step_time: a measured time would make the order of
// arrivals a matter of luck). The run's steps are slots of time, each
// step_time / (the fastest node's speed) long: in each, a node computes one
// step if it is free and its clock is within the slot, else it sits the slot
// out. train.max_steps counts slots, so a node half as fast computes about
// half as many steps. An update travels over the sender's link (latency +
// bytes / bandwidth), the reply likewise.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "exogym/sdk/strategy.h"

namespace exogym::sdk {

// One node's update as the server receives it.
struct AsyncUpdate {
  int rank = 0;
  double arrived_at = 0;  // simulated seconds
  // The server's version() the sender started its round from (the one in
  // its last reply; 0 before any).
  int64_t base_version = 0;
  std::vector<at::Tensor> tensors;
};

// What the node receives back.
struct AsyncReply {
  int64_t version = 0;  // the server's version() when it replied
  std::vector<at::Tensor> tensors;
};

// The strategy's server: one object per process, which its nodes share
// (shared.h). The runtime calls it between two slots, when every node of
// the process waits, on one thread: no lock is needed. Over several
// processes each process's server receives every node's updates and is
// asked every reply, in the same order: the servers stay alike.
class AsyncServer {
 public:
  virtual ~AsyncServer() = default;
  // Updates that arrived at the same simulated time, in rank order; calls
  // come in the order of arrival.
  virtual void receive(const std::vector<AsyncUpdate>& arrivals) = 0;
  // After receive(): the reply to one of those senders.
  virtual std::vector<at::Tensor> reply(int rank) = 0;
  // How many times the server changed its model: an update's staleness is
  // version() when it is applied minus its base_version.
  virtual int64_t version() const = 0;
  // Checkpoints: the server's state (saved with each process's first node).
  virtual void save_state(StateDict& out) const = 0;
  virtual void load_state(const StateDict& in) = 0;
};

// The node's side: NodeContext::async, null where the runtime cannot run an
// asynchronous strategy (then connect's caller throws ConfigError).
class AsyncLink {
 public:
  virtual ~AsyncLink() = default;
  // Once, from init(), every node with the process's server. After init()
  // the runtime stops the run, naming the manifest's field, if it cannot
  // be asynchronous (no fixed compute.step_time, for one).
  virtual void connect(std::shared_ptr<AsyncServer> server, std::function<void(const AsyncReply&)> on_reply) = 0;
  // From step(): sends `update` when the step ends; the node then waits for
  // the reply. At most one update in flight per node.
  virtual void send(std::vector<at::Tensor> update) = 0;
  // This node's speed over the fastest node's, in (0, 1]: a strategy with
  // dynamic local updates does this share of the fastest node's steps.
  virtual double relative_speed() const = 0;
};

}  // namespace exogym::sdk
