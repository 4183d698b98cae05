#pragma once
// What each client keeps between its rounds (Strategy::has_client_state,
// docs/simulation.md#state-that-belongs-to-a-client), for a strategy that
// has such state in a run with participation.
//
// A round's start, in the order the nodes go through it:
//  1. Every node live in the round before offers its client's state
//     (offer(), on its thread, before the membership meeting): it does not
//     know yet whether its client leaves it.
//  2. At the meeting, while every node waits, the membership settles the
//     store (settle()): it keeps the offers of the nodes whose client
//     leaves, drops the others (those clients stay where they are), forgets
//     the clients whose node failed, and takes out the state of each client
//     a node takes on, to hand it over.
//  3. Each node that takes on a client loads handed() after the recovery.
// The store holds only clients that have trained and are not on a node,
// each as the CPU tensors its strategy saved: its size is what the
// strategy chose to keep per client times the clients that trained.
//
// Over several processes every process keeps a whole store: settle() sends
// each process's kept offers to the others, so that all stores stay alike
// and node 0 alone writes them to a checkpoint.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "exogym/runtime/checkpoint/client_states.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}

namespace exogym::runtime::train {

class ClientStore {
 public:
  // Node `node`'s state of client `client` (copied to the CPU). Any node's
  // thread.
  void offer(int node, int client, const sdk::StateDict& state);

  // The meeting's work: keeps the offers of the `leaving` nodes, forgets
  // the `lost` clients, and hands over the state of the `taken` clients.
  // Every process calls it with the same lists.
  void settle(const std::vector<int>& leaving, const std::vector<int>& taken, const std::vector<int>& lost,
              dist::ProcessMesh* mesh);

  // After settle(): the stored state of `client`, handed over (empty: it
  // has not trained yet). Valid until the next settle().
  const sdk::StateDict& handed(int client) const;

  // The clients stored and the bytes of their tensors (summary.json).
  int64_t clients() const { return static_cast<int64_t>(stored_.size()); }
  double bytes() const { return bytes_; }

  // For a checkpoint, and back on resume.
  const checkpoint::ClientStates& stored() const { return stored_; }
  void restore(checkpoint::ClientStates states);

 private:
  void store(int client, sdk::StateDict state);
  // Takes client's state out of the store (nullopt: it holds none).
  std::optional<sdk::StateDict> remove(int client);
  void share(dist::ProcessMesh& mesh, std::map<int, std::pair<int, sdk::StateDict>>& kept);

  std::mutex offers_mutex_;
  std::map<int, std::pair<int, sdk::StateDict>> offers_;  // by node: its client and its state
  checkpoint::ClientStates stored_, handed_;
  double bytes_ = 0;
};

}  // namespace exogym::runtime::train
