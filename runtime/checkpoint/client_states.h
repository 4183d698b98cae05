#pragma once
// The clients' part of a checkpoint (train/client_store.h): the state each
// client keeps between its rounds (Strategy::has_client_state), in one safetensors
// file, "clients.safetensors", with tensors "client.<client>.<key>" and in
// the metadata the step and a digest (state_digest.h). Written by node 0
// only: every process's store holds every client's state.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

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

// Whether `states`, read from `file`, fit a run of `clients` clients: every
// client in 0 to clients - 1, and every client's state of one layout (the
// same keys, each of one dtype and shape), as one strategy saves it. A hand
// edit with its digest recomputed is otherwise taken as it is, and a
// client's state of another dtype silently gives another model.
// sdk::DataError naming the file, the client and the tensor.
void check_client_states(const ClientStates& states, int clients, const std::string& file);

}  // namespace exogym::runtime::checkpoint
