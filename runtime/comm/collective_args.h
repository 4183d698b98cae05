#pragma once
// What every collective backend does with the tensors a node hands it: check
// them, work on contiguous memory, and copy results back into the tensors
// that were not contiguous.
#include <ATen/core/Tensor.h>

#include <vector>

namespace exogym::runtime::comm {

// The tensors themselves where contiguous, else contiguous copies. Throws
// sdk::Error for an undefined tensor.
std::vector<at::Tensor> contiguous_payload(const std::vector<at::Tensor>& tensors);

// Copies `work` (from contiguous_payload) into the caller's tensors it does
// not share storage with.
void copy_back(std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& work);

// Throws sdk::Error unless `root` is a rank of a group of `size`.
void check_root(int root, int size);

}  // namespace exogym::runtime::comm
