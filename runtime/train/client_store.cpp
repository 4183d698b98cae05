#include "exogym/runtime/train/client_store.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "exogym/runtime/comm/named_tensor_broadcast.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

double state_bytes(const sdk::StateDict& state) {
  double bytes = 0;
  for (const auto& [key, tensor] : state) bytes += static_cast<double>(tensor.nbytes());
  return bytes;
}

}  // namespace

void ClientStore::offer(int node, int client, const sdk::StateDict& state) {
  // Nothing to keep: the client stores nothing (and nothing travels).
  if (state.empty()) return;
  sdk::StateDict copy;
  // One copy, on the CPU (a GPU's memory is for the nodes).
  for (const auto& [key, tensor] : state)
    copy.emplace(key, tensor.detach().to(tensor.options().device(at::kCPU), false, /*copy=*/true).contiguous());
  std::lock_guard<std::mutex> lock(offers_mutex_);
  offers_[node] = {client, std::move(copy)};
}

void ClientStore::store(int client, sdk::StateDict state) {
  auto it = stored_.find(client);
  if (it != stored_.end()) bytes_ -= state_bytes(it->second);
  bytes_ += state_bytes(state);
  stored_[client] = std::move(state);
}

void ClientStore::settle(const std::vector<int>& leaving, const std::vector<int>& taken, const std::vector<int>& lost,
                         dist::ProcessMesh* mesh) {
  handed_.clear();
  std::map<int, std::pair<int, sdk::StateDict>> kept;
  {
    std::lock_guard<std::mutex> lock(offers_mutex_);
    for (int node : leaving) {
      auto it = offers_.find(node);
      if (it != offers_.end()) kept.emplace(node, std::move(it->second));
    }
    offers_.clear();
  }
  if (mesh) share(*mesh, kept);
  for (auto& [node, offer] : kept) store(offer.first, std::move(offer.second));
  for (int client : lost) remove(client);
  for (int client : taken) {
    if (auto state = remove(client)) handed_.emplace(client, std::move(*state));
  }
}

std::optional<sdk::StateDict> ClientStore::remove(int client) {
  auto it = stored_.find(client);
  if (it == stored_.end()) return std::nullopt;
  bytes_ -= state_bytes(it->second);
  sdk::StateDict state = std::move(it->second);
  stored_.erase(it);
  return state;
}

// Each process in turn sends the offers it kept, as "<node>.<client>.<key>"
// (offers are never empty, so every one arrives).
void ClientStore::share(dist::ProcessMesh& mesh, std::map<int, std::pair<int, sdk::StateDict>>& kept) {
  std::map<int, std::pair<int, sdk::StateDict>> all;
  for (int root = 0; root < mesh.size(); ++root) {
    comm::NamedTensorList mine;
    if (root == mesh.rank()) {
      for (const auto& [node, offer] : kept) {
        const std::string head = std::to_string(node) + "." + std::to_string(offer.first) + ".";
        for (const auto& [key, tensor] : offer.second) mine.emplace_back(head + key, tensor);
      }
    }
    for (auto& [name, tensor] : comm::broadcast_named_tensors(mesh, root, mine, "the clients' states")) {
      const size_t first = name.find('.'), second = name.find('.', first + 1);
      EXOGYM_CHECK_INTERNAL(second != std::string::npos, "a client state named " + name);
      auto& offer = all[std::stoi(name.substr(0, first))];
      offer.first = std::stoi(name.substr(first + 1, second - first - 1));
      offer.second.emplace(name.substr(second + 1), std::move(tensor));
    }
  }
  kept = std::move(all);
}

const sdk::StateDict& ClientStore::handed(int client) const {
  static const sdk::StateDict none;
  auto it = handed_.find(client);
  return it == handed_.end() ? none : it->second;
}

void ClientStore::restore(checkpoint::ClientStates states) {
  stored_.clear();
  handed_.clear();
  bytes_ = 0;
  for (auto& [client, state] : states) store(client, std::move(state));
}

}  // namespace exogym::runtime::train
