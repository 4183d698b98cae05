#include "exogym/runtime/checkpoint/client_states.h"

#include <ATen/core/Tensor.h>
#include <c10/util/StringUtil.h>

#include <string>

#include "exogym/runtime/checkpoint/state_digest.h"
#include "exogym/runtime/output/safetensors.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::checkpoint {

namespace fs = std::filesystem;

namespace {

const char* const kClientStatesFormat = "exogym-client-states-1";
const std::string kPrefix = "client.";

}  // namespace

void write_client_states(const fs::path& folder, int64_t step, const ClientStates& states) {
  output::NamedTensors tensors;
  for (const auto& [client, state] : states) {
    for (const auto& [key, tensor] : state)
      tensors.emplace_back(kPrefix + std::to_string(client) + "." + key, tensor.contiguous());
  }
  std::map<std::string, std::string> metadata = {{"format", kClientStatesFormat}, {"step", std::to_string(step)}};
  metadata[kDigestKey] = state_digest(tensors, metadata);
  output::write_safetensors(folder / kClientStatesFile, tensors, metadata);
}

ClientStates read_client_states(const fs::path& folder, int64_t step) {
  const fs::path file = folder / kClientStatesFile;
  if (!fs::exists(file)) throw sdk::DataError(file.string() + ": missing (the state the clients keep between rounds)");
  const output::SafetensorsFile read = output::read_safetensors(file);
  auto field = [&](const char* key) {
    auto it = read.metadata.find(key);
    if (it == read.metadata.end())
      throw sdk::DataError(file.string() + ": not an ExoGym client state file (no \"" + key + "\")");
    return it->second;
  };
  if (field("format") != kClientStatesFormat)
    throw sdk::DataError(file.string() + ": unknown client state format \"" + field("format") + "\"");
  if (field("step") != std::to_string(step))
    throw sdk::DataError(file.string() + ": holds step " + field("step") + ", expected " + std::to_string(step));
  if (field(kDigestKey) != state_digest(read.tensors, read.metadata))
    throw sdk::DataError(file.string() + ": damaged (its tensors or metadata do not match its digest)");
  ClientStates states;
  for (const auto& [name, tensor] : read.tensors) {
    const size_t dot = name.find('.', kPrefix.size());
    const std::string number = name.substr(kPrefix.size(), dot == std::string::npos ? 0 : dot - kPrefix.size());
    if (name.compare(0, kPrefix.size(), kPrefix) != 0 || dot == std::string::npos || number.empty() ||
        number.find_first_not_of("0123456789") != std::string::npos || number.size() > 9) {
      throw sdk::DataError(file.string() + ": tensor \"" + name + "\" is not named client.<client>.<key>");
    }
    states[std::stoi(number)].emplace(name.substr(dot + 1), tensor);
  }
  return states;
}

void check_client_states(const ClientStates& states, int clients, const std::string& file) {
  if (states.empty()) return;
  const auto& [first, layout] = *states.begin();
  auto name = [](int client, const std::string& key) {
    return "\"" + kPrefix + std::to_string(client) + "." + key + "\"";
  };
  for (const auto& [client, state] : states) {
    if (client >= clients) {
      throw sdk::DataError(file + ": client " + std::to_string(client) + " is not in this run's " +
                           std::to_string(clients) + " clients (0 to " + std::to_string(clients - 1) + ")");
    }
    for (const auto& [key, tensor] : state) {
      auto same = layout.find(key);
      if (same == layout.end()) {
        throw sdk::DataError(file + ": tensor " + name(client, key) + " has no counterpart " + name(first, key) +
                             ": every client's state has the same tensors");
      }
      if (tensor.scalar_type() != same->second.scalar_type() || !tensor.sizes().equals(same->second.sizes())) {
        throw sdk::DataError(file + ": tensor " + name(client, key) + " is " + c10::toString(tensor.scalar_type()) +
                             " " + c10::str(tensor.sizes()) + ", but " + name(first, key) + " is " +
                             c10::toString(same->second.scalar_type()) + " " + c10::str(same->second.sizes()) +
                             ": every client's state has the same dtypes and shapes");
      }
    }
    if (state.size() != layout.size()) {
      for (const auto& [key, tensor] : layout) {
        if (!state.count(key))
          throw sdk::DataError(file + ": client " + std::to_string(client) + " has no tensor " + name(client, key) +
                               ", which " + name(first, key) + " has: every client's state has the same tensors");
      }
    }
  }
}

}  // namespace exogym::runtime::checkpoint
