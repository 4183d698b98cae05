#include "exogym/runtime/host/devices.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <algorithm>
#include <sstream>

#include "exogym/sdk/error.h"

namespace exogym::runtime::host {

std::vector<c10::Device> resolve_devices(const std::string& spec) {
  if (spec == "cpu") return {c10::Device(c10::kCPU)};
  const bool cuda = torch::cuda::is_available();
  if (spec == "auto") return {cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU)};
  if (spec.rfind("cuda", 0) != 0) {
    throw sdk::ConfigError("device", "expected \"cpu\", \"auto\", \"cuda\" or \"cuda:0,1,...\", got \"" + spec + "\"");
  }
  if (!cuda) {
    throw sdk::ConfigError("device", "\"" + spec +
                                         "\" asked for, but CUDA is not available (this LibTorch has no CUDA "
                                         "support or no GPU is visible); use \"cpu\" or \"auto\"");
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  std::vector<c10::Device> devices;
  if (spec == "cuda") {
    for (int i = 0; i < count; ++i) devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
    return devices;
  }
  if (spec.size() < 6 || spec[4] != ':') throw sdk::ConfigError("device", "cannot parse \"" + spec + "\"");
  std::stringstream list(spec.substr(5));
  std::string item;
  while (std::getline(list, item, ',')) {
    int index = -1;
    try {
      size_t used = 0;
      index = std::stoi(item, &used);
      if (used != item.size()) index = -1;
    } catch (...) {
      index = -1;
    }
    if (index < 0) throw sdk::ConfigError("device", "bad GPU index \"" + item + "\" in \"" + spec + "\"");
    if (index >= count) {
      throw sdk::ConfigError(
          "device", "GPU " + std::to_string(index) + " does not exist (" + std::to_string(count) + " visible)");
    }
    devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  if (devices.empty()) throw sdk::ConfigError("device", "no GPU listed in \"" + spec + "\"");
  return devices;
}

void use_reproducible_kernels(const std::vector<c10::Device>& devices) {
  if (std::none_of(devices.begin(), devices.end(), [](const c10::Device& d) { return d.is_cuda(); })) return;
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

sdk::Batch to_device(sdk::Batch batch, const c10::Device& device) {
  if (device.is_cpu()) return batch;
  // From pageable memory a copy waits for the device's queue to drain; from
  // page-locked memory it is queued like a kernel, so the loop keeps the GPU busy.
  const bool pin = device.is_cuda();
  for (auto& [name, tensor] : batch) tensor = (pin ? tensor.pin_memory() : tensor).to(device, /*non_blocking=*/true);
  return batch;
}

}  // namespace exogym::runtime::host
