// The parts of Membership that cross processes (membership.h): every
// process takes the same decisions from the same facts, so what one process
// alone knows (its nodes' clocks, the donor's state and meter) goes to all.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "exogym/runtime/comm/tensor_message.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/train/membership.h"
#include "exogym/runtime/train/simulation.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

std::vector<double> Membership::node_clocks(const Simulation& simulation) const {
  std::vector<double> clocks(static_cast<size_t>(nodes_), 0.0);
  const dist::NodeBlock& mine = simulation.block();
  for (int r = mine.first; r < mine.first + mine.count; ++r) clocks[static_cast<size_t>(r)] = simulation.meter(r).clock();
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

sim::DonorView Membership::share_deposit(const Simulation& simulation) {
  if (!mesh_) return simulation.meter(donor_).donor_view();
  // What the donor's process announces before the state itself.
  struct Header {
    sim::DonorView view;
    uint64_t names_bytes = 0, payload_bytes = 0;
  };
  const int root = dist::process_of_node(donor_, nodes_, mesh_->size());
  const bool sends = mesh_->rank() == root;
  Header header;
  std::string names;
  at::Tensor payload;
  if (sends) {
    EXOGYM_CHECK_INTERNAL(deposit_ != nullptr, "the donor deposited no recovery state");
    nlohmann::json keys = nlohmann::json::array();
    std::vector<at::Tensor> tensors;
    for (const auto& [key, tensor] : *deposit_) {
      keys.push_back(key);
      tensors.push_back(tensor.cpu());
    }
    names = keys.dump();
    payload = comm::pack_tensors(tensors);
    header.view = simulation.meter(donor_).donor_view();
    header.names_bytes = names.size();
    header.payload_bytes = static_cast<uint64_t>(payload.numel());
  }
  mesh_->broadcast(&header, sizeof header, root);
  if (!sends) {
    names.resize(header.names_bytes);
    payload = at::empty({static_cast<int64_t>(header.payload_bytes)}, at::kByte);
  }
  mesh_->broadcast(names.data(), names.size(), root);
  mesh_->broadcast(payload.data_ptr(), header.payload_bytes, root);
  if (!sends) {
    const auto keys = nlohmann::json::parse(names);
    const auto tensors = comm::unpack_tensors(payload);
    if (!tensors || tensors->size() != keys.size()) {
      throw sdk::Error("the recovery state from " + mesh_->describe(root) + " is malformed");
    }
    auto state = std::make_shared<sdk::StateDict>();
    // Clones: the tensors view `payload`, which goes.
    for (size_t i = 0; i < keys.size(); ++i) (*state)[keys[i].get<std::string>()] = (*tensors)[i].clone();
    deposit_ = std::move(state);
  }
  return header.view;
}

}  // namespace exogym::runtime::train
