#pragma once
// Device placement: "cpu", "auto", "cuda", "cuda:N" or "cuda:N,M,...". Nodes
// are placed round-robin over the listed devices.
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "exogym/sdk/model.h"

namespace exogym::runtime::host {

// Throws ConfigError at "device" if CUDA is asked for but not available.
std::vector<c10::Device> resolve_devices(const std::string& spec);

inline c10::Device device_for_node(const std::vector<c10::Device>& devices, int rank) {
  return devices[static_cast<size_t>(rank) % devices.size()];
}

// `batch` on `device` (on the CPU, as it is).
sdk::Batch to_device(sdk::Batch batch, const c10::Device& device);

}  // namespace exogym::runtime::host
