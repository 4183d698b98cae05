#pragma once
// The clients' part of a checkpoint (train/client_store.h): the state each
// client keeps between its rounds (sdk/client_state.h), in one safetensors
// file, "clients.safetensors", with tensors "client.<client>.<key>" and in
// the metadata the step and a digest (state_digest.h). Written by node 0
// only: every process's store holds every client's state.
#include <cstdint>
#include <filesystem>
#include <map>

#include "exogym/sdk/strategy.h"

namespace exogym::runtime::checkpoint {

inline constexpr const char* kClientStatesFile = "clients.safetensors";

// By client.
using ClientStates = std::map<int, sdk::StateDict>;

// Into `folder` (write_file_atomically); the tensors are CPU tensors.
void write_client_states(const std::filesystem::path& folder, int64_t step, const ClientStates& states);

// The file, read and checked: sdk::DataError naming it when it is missing,
// not valid safetensors, of another step, damaged, or holds a tensor whose
// name is not "client.<client>.<key>".
ClientStates read_client_states(const std::filesystem::path& folder, int64_t step);

}  // namespace exogym::runtime::checkpoint
