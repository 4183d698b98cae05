#include "exogym/runtime/comm/named_tensor_broadcast.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "exogym/runtime/comm/tensor_message.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

NamedTensorList broadcast_named_tensors(dist::ProcessMesh& mesh, int root, const NamedTensorList& tensors,
                                        const std::string& what) {
  if (mesh.rank() == root) {
    nlohmann::json names = nlohmann::json::array();
    std::vector<at::Tensor> data;
    for (const auto& [name, tensor] : tensors) {
      names.push_back(name);
      data.push_back(tensor.cpu());
    }
    std::string text = names.dump();
    at::Tensor payload = pack_tensors(data);
    uint64_t sizes[2] = {text.size(), static_cast<uint64_t>(payload.numel())};
    mesh.broadcast(sizes, sizeof sizes, root);
    mesh.broadcast(text.data(), text.size(), root);
    mesh.broadcast(payload.data_ptr(), sizes[1], root);
    return tensors;
  }
  uint64_t sizes[2] = {0, 0};
  mesh.broadcast(sizes, sizeof sizes, root);
  std::string text(sizes[0], '\0');
  at::Tensor payload = at::empty({static_cast<int64_t>(sizes[1])}, at::kByte);
  mesh.broadcast(text.data(), text.size(), root);
  mesh.broadcast(payload.data_ptr(), sizes[1], root);
  const auto names = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto data = unpack_tensors(payload);
  if (!names.is_array() || !data || data->size() != names.size()) {
    throw sdk::Error(what + " from " + mesh.describe(root) + " is malformed");
  }
  NamedTensorList received;
  // Clones: the unpacked tensors view `payload`, which goes.
  for (size_t i = 0; i < names.size(); ++i) received.emplace_back(names[i].get<std::string>(), (*data)[i].clone());
  return received;
}

}  // namespace exogym::runtime::comm
