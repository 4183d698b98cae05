#pragma once
// Which client each node trains while a run draws from a population larger
// than its nodes (docs/simulation.md#populations-of-clients): the nodes are
// slots that take on a drawn client's identity for a round, its data
// (PopulationSampler), speed and bandwidth. Written between steps while
// every node waits at the membership's meeting (train/membership.h); read
// by each node during its steps.
#include <vector>

namespace exogym::runtime::data {

class ClientSlots {
 public:
  // Node r holds client r until the first draw.
  explicit ClientSlots(int nodes) : clients_(static_cast<size_t>(nodes)) {
    for (int r = 0; r < nodes; ++r) clients_[static_cast<size_t>(r)] = r;
  }
  int client(int node) const { return clients_.at(static_cast<size_t>(node)); }
  const std::vector<int>& clients() const { return clients_; }
  void assign(int node, int client) { clients_.at(static_cast<size_t>(node)) = client; }

 private:
  std::vector<int> clients_;
};

}  // namespace exogym::runtime::data
