#include "exogym/runtime/train/autocast_scope.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

// LibTorch 2.4 made autocast's state a function of the device type; 1.13
// (Debian) has one function per device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
#else
bool autocast_enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
#endif

namespace {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
void set_autocast_enabled(c10::DeviceType device, bool on) { at::autocast::set_autocast_enabled(device, on); }
c10::ScalarType autocast_dtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
void set_autocast_enabled(c10::DeviceType device, bool on) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
}
c10::ScalarType autocast_dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace

AutocastScope::AutocastScope(manifest::Precision precision, c10::DeviceType device) : device_(device) {
  if (precision == manifest::Precision::Fp32) return;
  EXOGYM_CHECK_INTERNAL(device == c10::DeviceType::CPU || device == c10::DeviceType::CUDA,
                        "autocast on a device other than the CPU or CUDA");
  was_enabled_ = autocast_enabled(device);
  was_dtype_ = autocast_dtype(device);
  set_autocast_dtype(device, c10::ScalarType::BFloat16);
  set_autocast_enabled(device, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(device_, was_enabled_);
  set_autocast_dtype(device_, was_dtype_);
}

}  // namespace exogym::runtime::train
