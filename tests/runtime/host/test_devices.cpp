// Device placement (runtime/host/devices.h): what a manifest's "device" asks
// for, and the process-wide kernel choices a GPU run makes to reproduce.
#include <ATen/Context.h>

#include "exogym/runtime/host/devices.h"
#include "testing.h"

namespace exogym::test {

using runtime::host::resolve_devices;
using runtime::host::use_reproducible_kernels;

TEST_CASE("devices: cpu resolves to the CPU, malformed specs name the field", "[devices]") {
  const auto cpu = resolve_devices("cpu");
  REQUIRE(cpu.size() == 1);
  CHECK(cpu[0].is_cpu());
  CHECK_THROWS_WITH(resolve_devices("tpu"),
                    Catch::Contains("expected \"cpu\", \"auto\", \"cuda\"") && Catch::Contains("got \"tpu\""));
}

TEST_CASE("devices: a run with a GPU asks cuDNN for deterministic algorithms, a CPU run leaves the setting alone",
          "[devices]") {
  auto& context = at::globalContext();
  const bool deterministic = context.deterministicCuDNN(), benchmark = context.benchmarkCuDNN();
  context.setDeterministicCuDNN(false);
  context.setBenchmarkCuDNN(true);
  use_reproducible_kernels({c10::Device(c10::kCPU)});
  CHECK_FALSE(context.deterministicCuDNN());
  CHECK(context.benchmarkCuDNN());
  // Setting the flags needs no GPU: the device is only named.
  use_reproducible_kernels({c10::Device(c10::kCPU), c10::Device(c10::kCUDA, 0)});
  CHECK(context.deterministicCuDNN());
  CHECK_FALSE(context.benchmarkCuDNN());
  context.setDeterministicCuDNN(deterministic);
  context.setBenchmarkCuDNN(benchmark);
}

}  // namespace exogym::test
