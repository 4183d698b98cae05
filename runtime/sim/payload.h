#pragma once
#include <vector>

namespace at {
class Tensor;
}

namespace exogym::runtime::sim {

// Bytes of the tensors' data at their dtype (undefined tensors count 0).
double payload_bytes(const std::vector<at::Tensor>& tensors);

}  // namespace exogym::runtime::sim
