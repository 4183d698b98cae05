#include "exogym/runtime/comm/collective_args.h"

#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

std::vector<at::Tensor> contiguous_payload(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> work;
  work.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!t.defined()) throw sdk::Error("collective called with an undefined tensor");
    work.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  return work;
}

void copy_back(std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& work) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!work[i].is_same(tensors[i])) tensors[i].copy_(work[i]);
  }
}

void check_root(int root, int size) {
  if (root < 0 || root >= size) {
    throw sdk::Error("broadcast: root " + std::to_string(root) + " is not a rank of " + std::to_string(size));
  }
}

}  // namespace exogym::runtime::comm
