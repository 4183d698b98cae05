#pragma once
// How tensors travel between processes: as bytes, each tensor at an aligned
// offset, so that the tensors viewed over the bytes received are aligned like
// freshly allocated ones. Views over a byte buffer live as long as it does.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace exogym::runtime::comm {

// Tensors of known shapes and dtypes, one after another: a block. A buffer
// may hold several blocks (one per node).
class TensorLayout {
 public:
  // The layout of `tensors`' shapes and dtypes.
  explicit TensorLayout(const std::vector<at::Tensor>& tensors);
  int64_t block_bytes() const { return block_bytes_; }
  // Tensor `i` of block `block` in `buffer` (bytes).
  at::Tensor view(const at::Tensor& buffer, size_t i, int64_t block = 0) const;

 private:
  std::vector<std::vector<int64_t>> sizes_;
  std::vector<at::ScalarType> dtypes_;
  std::vector<int64_t> offsets_;
  int64_t block_bytes_ = 0;
};

// A message that holds tensors of any shapes and dtypes and describes them:
// [number of int64 words of metadata][metadata: per tensor dtype, dim,
// sizes...][data, each tensor aligned].
at::Tensor pack_tensors(const std::vector<at::Tensor>& tensors);
// The tensors of a message from pack_tensors, viewing its bytes; nullopt if
// the message is malformed.
std::optional<std::vector<at::Tensor>> unpack_tensors(const at::Tensor& message);

}  // namespace exogym::runtime::comm
