#pragma once
// State that belongs to a client rather than to the node training it
// (docs/plugins.md#state-that-belongs-to-a-client).
//
// With participation (docs/simulation.md#partial-participation) a round
// trains some of the clients: the nodes themselves, or, with a population
// (participation.clients), drawn clients that the nodes take on in turn.
// A node that takes part again, or takes on another client, receives the
// run's state from a donor (Strategy::load_recovery_state), which is right
// for the model everyone shares but wrong for what is the client's own: an
// error-feedback residual, SCAFFOLD's control variate. A strategy that has
// such state also derives from ClientState, and the runtime keeps that part
// for each client between its rounds, on the client's side (no bytes on
// the network):
//  - save_client_state: on a node whose client leaves it (sits the next
//    round out, or another client takes the node), at the round's start
//    before the membership changes. What it puts in `out` is copied to the
//    CPU and stored under the client.
//  - load_client_state: on a node that takes on a client, after
//    load_recovery_state, with what the client's last save_client_state
//    stored, or an empty dict for a client that has not trained yet (start
//    it from none).
// Both on the node's thread, no collectives; sdk::Error for a state that
// does not fit. A node that fails loses its client's state with its memory.
// The store is part of checkpoints (clients.safetensors), so a resumed run
// continues bit for bit. NodeContext::client and ::clients say which client
// a node trains and how many there are. Without participation nothing is
// called: every node is its own client all run long.
#include "exogym/sdk/strategy.h"

namespace exogym::sdk {

class ClientState {
 public:
  virtual ~ClientState();
  virtual void save_client_state(StateDict& out) const = 0;
  virtual void load_client_state(const StateDict& in) = 0;
};

}  // namespace exogym::sdk
