#pragma once
// The digest that a checkpoint's safetensors files carry
// (node_state.h, client_states.h): FNV-1a over every byte that is read back
// and used, each tensor's name, dtype, shape and data in file order, then
// every metadata entry but the digest itself. An edited header (a dtype, a
// shape) is damage as much as a flipped bit of data.
#include <map>
#include <string>

#include "exogym/runtime/output/safetensors.h"

namespace exogym::runtime::checkpoint {

// The metadata key the digest is stored under.
inline constexpr const char* kDigestKey = "digest_fnv1a";

// CPU tensors, contiguous.
std::string state_digest(const output::NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace exogym::runtime::checkpoint
