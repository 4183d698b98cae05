// The parts of Membership that cross processes (membership.h): every
// process takes the same decisions from the same facts, so what one process
// alone knows (its nodes' clocks, the donor's state and meter) goes to all.
#include <string>
#include <vector>

#include "exogym/runtime/comm/named_tensor_broadcast.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/train/meters.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

std::vector<double> Membership::node_clocks(const Meters& simulation) const {
  std::vector<double> clocks(static_cast<size_t>(nodes_), 0.0);
  const dist::NodeBlock& mine = simulation.block();
  for (int r = mine.first; r < mine.first + mine.count; ++r)
    clocks[static_cast<size_t>(r)] = simulation.meter(r).clock();
  if (!mesh_) return clocks;
  // Each process's block of clocks lands where its ranks are.
  const int P = mesh_->size();
  std::vector<void*> out(static_cast<size_t>(P));
  std::vector<size_t> sizes(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) {
    const dist::NodeBlock block = dist::node_block(nodes_, P, q);
    out[q] = &clocks[static_cast<size_t>(block.first)];
    sizes[q] = static_cast<size_t>(block.count) * sizeof(double);
  }
  mesh_->all_gather(&clocks[static_cast<size_t>(mine.first)], sizes[mesh_->rank()], out, sizes);
  return clocks;
}

sim::DonorView Membership::share_deposit(const Meters& simulation) {
  if (!mesh_) return simulation.meter(donor_).donor_view();
  const int root = dist::process_of_node(donor_, nodes_, mesh_->size());
  const bool sends = mesh_->rank() == root;
  sim::DonorView view;
  comm::NamedTensorList state;
  if (sends) {
    EXOGYM_CHECK_INTERNAL(deposit_ != nullptr, "the donor deposited no recovery state");
    view = simulation.meter(donor_).donor_view();
    state.assign(deposit_->begin(), deposit_->end());
  }
  mesh_->broadcast(&view, sizeof view, root);
  state = comm::broadcast_named_tensors(*mesh_, root, state, "the recovery state");
  if (!sends) deposit_ = std::make_shared<sdk::StateDict>(state.begin(), state.end());
  return view;
}

}  // namespace exogym::runtime::train
