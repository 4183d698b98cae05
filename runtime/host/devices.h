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

// Makes the kernels of a run on `devices` choose the same algorithms every
// time, where one is a GPU: cuDNN otherwise picks among convolution
// algorithms some that sum with atomics, in an order that changes from run to
// run (a stacked CNN's grouped convolution does), and a run must reproduce bit
// for bit. Process-wide: every run of the process computes the same way.
void use_reproducible_kernels(const std::vector<c10::Device>& devices);

// `batch` on `device` (on the CPU, as it is).
sdk::Batch to_device(sdk::Batch batch, const c10::Device& device);

}  // namespace exogym::runtime::host
