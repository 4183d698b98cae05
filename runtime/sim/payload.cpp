#include "exogym/runtime/sim/payload.h"

#include <ATen/core/Tensor.h>

namespace exogym::runtime::sim {

double payload_bytes(const std::vector<at::Tensor>& tensors) {
  double bytes = 0;
  for (const auto& t : tensors) {
    if (t.defined()) bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
  }
  return bytes;
}

}  // namespace exogym::runtime::sim
