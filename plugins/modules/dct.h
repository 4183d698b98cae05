#pragma once
// DeMo's transform and compression (bloc97/DeMo, as the reference uses it):
// a parameter-shaped tensor is cut into chunks, each chunk goes through an
// orthonormal DCT-II, and only the top-k coefficients (by magnitude) of each
// chunk are sent. Everything here is deterministic: selections and averages
// do not depend on thread scheduling, so every node decodes the same update.
// Nothing here communicates: the "demo" strategy all-gathers what compress()
// selects and combines the messages with batch_decompress().
//
// Layouts ("encoded" tensors):
//   0-D / 1-D of length N, chunk n:  (N/n, n), a DCT per row.
//   2-D R x C, chunks n1, n2:        (R/n1, C/n2, n1, n2), a 2-D DCT per tile.
//   more than 2-D (d0, d1, ...):     as the 2-D tensor (d0, d1*d2*...).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace exogym::modules::demo {

// The largest divisor of `size` that is <= `target` (`size` itself when
// size <= target): the reference's TransformDCT chunk size, e.g. with
// target 64: 784 -> 56, 50257 -> 29, 97 -> 1, 66 -> 33, 65 -> 13, 128 -> 64.
int64_t chunk_size(int64_t size, int64_t target);

// The orthonormal DCT-II matrix D (n x n), D[k][j] = c_k cos(pi (2j+1) k / 2n),
// c_0 = sqrt(1/n), c_k = sqrt(2/n). Computed in double, returned in `dtype`
// on `device`. D·Dᵀ = I, so the inverse transform is Dᵀ.
at::Tensor dct_basis(int64_t n, at::ScalarType dtype, c10::Device device);

// Encoded shape and the 2-D view a parameter shape is transformed as.
class DctTransform {
 public:
  explicit DctTransform(int64_t target_chunk);

  int64_t target_chunk() const { return target_; }

  // `x` (any shape) -> its encoded layout (see above).
  at::Tensor encode(const at::Tensor& x);
  // The inverse of encode: an encoded tensor back to `shape`.
  at::Tensor decode(const at::Tensor& encoded, at::IntArrayRef shape);

  // D for chunk size n in the dtype and on the device of `like` (cached).
  const at::Tensor& basis(int64_t n, const at::Tensor& like);

 private:
  int64_t target_;
  std::map<std::tuple<int64_t, int, std::string>, at::Tensor> cache_;
};

// Top-k coefficients of each chunk. A 4-D encoding (Y, X, n1, n2) is treated
// as (Y, X, n1*n2); a 2-D one as is. k is clamped to [1, chunk elements].
struct Compressed {
  at::Tensor idx;  // int64, (..., k): positions within the flattened chunk
  at::Tensor val;  // the coefficients at idx
};
Compressed compress(const at::Tensor& encoded, int64_t topk);

// Zeros of `encoded_shape` with `val` placed at `idx` (one node's message).
at::Tensor decompress(const at::Tensor& idx, const at::Tensor& val, at::IntArrayRef encoded_shape);

// Every node's message combined: each coefficient is the mean of the values
// sent by the nodes that selected it (not divided by the number of nodes);
// coefficients nobody selected are 0. Sums in list order, so the result is
// bit-identical on every node.
at::Tensor batch_decompress(const std::vector<at::Tensor>& idx, const std::vector<at::Tensor>& val,
                            at::IntArrayRef encoded_shape);

}  // namespace exogym::modules::demo
