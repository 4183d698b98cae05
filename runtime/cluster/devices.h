#pragma once
// Device placement: "cpu", "auto", "cuda", "cuda:N" or "cuda:N,M,...". Nodes
// are placed round-robin over the listed devices.
#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace exogym::runtime::cluster {

// Throws ConfigError at "device" if CUDA is asked for but not available.
std::vector<c10::Device> resolve_devices(const std::string& spec);

inline c10::Device device_for_node(const std::vector<c10::Device>& devices, int rank) {
  return devices[static_cast<size_t>(rank) % devices.size()];
}

}  // namespace exogym::runtime::cluster
