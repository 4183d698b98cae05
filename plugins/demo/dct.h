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
//   2-D R x C, chunks n1, n2:        (R/n1, C/n2, n2, n1), a 2-D DCT per tile:
//                                    tile (y, x) holds at [b][a] the
//                                    coefficient of frequency a along its
//                                    rows and b along its columns.
//   more than 2-D (d0, d1, ...):     as the 2-D tensor (d0, d1*d2*...).
// Where a coefficient sits within a chunk is internal to these functions:
// compress() picks by magnitude, the decoders put it back where it was.
// The demo plugin's own code (not installed), built once as a static
// library that the plugin, its tests and exogym-bench link.
//
// On the CPU, float tensors whose tiles are at least 8 x 8 are encoded with
// a fast DCT (fast_dct.h, a few passes over the tile in cache); others
// with matrix products. Either is deterministic, and both equal the exact
// orthonormal transform up to float rounding.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace exogym::modules::demo {

namespace detail {
class DctPlan;
}

// The largest divisor of `size` that is <= `target` (`size` itself when
// size <= target): the reference's TransformDCT chunk size, e.g. with
// target 64: 784 -> 56, 50257 -> 29, 97 -> 1, 66 -> 33, 65 -> 13, 128 -> 64.
int64_t chunk_size(int64_t size, int64_t target);

// The orthonormal DCT-II matrix D (n x n), D[k][j] = c_k cos(pi (2j+1) k / 2n),
// c_0 = sqrt(1/n), c_k = sqrt(2/n). Computed in double, returned in `dtype`
// on `device`. D·Dᵀ = I, so the inverse transform is Dᵀ.
at::Tensor dct_basis(int64_t n, at::ScalarType dtype, c10::Device device);

// Top-k coefficients of each chunk by magnitude (of equal ones, the lower
// positions; a NaN counts as the largest, as in torch.topk, so that a
// non-finite momentum is sent and seen). A 4-D encoding (Y, X, n2, n1) is
// treated as (Y, X, n2*n1); a 2-D one as is. k is clamped to [1, chunk
// elements].
struct Compressed {
  at::Tensor idx;  // int64, (..., k): positions within the flattened chunk, ascending
  at::Tensor val;  // the coefficients at idx
};

// Encoded shape and the 2-D view a parameter shape is transformed as. Keeps
// the plans and buffers of the sizes it met: one per node (not shared
// between threads).
class DctTransform {
 public:
  explicit DctTransform(int64_t target_chunk);
  ~DctTransform();

  int64_t target_chunk() const { return target_; }

  // The encoded layout of a tensor of `shape` (see above).
  std::vector<int64_t> encoded_shape(at::IntArrayRef shape) const;

  // `x` (any shape) -> its encoded layout.
  at::Tensor encode(const at::Tensor& x);
  // The inverse of encode: an encoded tensor back to `shape`.
  at::Tensor decode(const at::Tensor& encoded, at::IntArrayRef shape);

  // DeMo's local half for one parameter, on its momentum kept encoded:
  // encoded_delta <- decay * encoded_delta + lr * encode(grad) (an undefined
  // grad counts as zero), then the top-k coefficients of each chunk are
  // taken out of encoded_delta (set to 0) and returned: what the node sends,
  // the rest being the residual it keeps. One pass over each tile in cache
  // on the fast path.
  Compressed accumulate_and_extract(at::Tensor& encoded_delta, const at::Tensor& grad, double decay, double lr,
                                    int64_t topk);

  // D for chunk size n in the dtype and on the device of `like` (cached).
  const at::Tensor& basis(int64_t n, const at::Tensor& like);

 private:
  bool fast_path(const at::Tensor& x, at::IntArrayRef tshape) const;
  const detail::DctPlan& plan(int64_t n);
  // The tiles of tile row y of the 2-D float tensor `x` (R x C,
  // contiguous), 2-D DCT'd: tile (y, xi)'s coefficient [b][a] at
  // block_[(xi * n2 + b) * n1 + a], to be multiplied by scale_[b * n1 + a]
  // to make it orthonormal.
  void encode_tile_row(const float* x, int64_t C, int64_t y, int64_t n1, int64_t n2);
  // visit(t, coefficients) for each tile t of `x` (on the fast path), in
  // the encoding's order; coefficients[i] * scale_[i] is its i-th.
  void for_each_tile(const at::Tensor& x, const std::function<void(int64_t, const float*)>& visit);
  at::Tensor encode_matmul(const at::Tensor& x);

  int64_t target_;
  std::map<std::tuple<int64_t, int, std::string>, at::Tensor> cache_;
  std::map<int64_t, std::unique_ptr<detail::DctPlan>> plans_;
  std::vector<float> scratch_, block_, scale_;
};

// The top-k coefficients of each chunk by magnitude (among equal ones, the
// lower position), taken out of `encoded` (set to 0).
Compressed extract_topk(at::Tensor& encoded, int64_t topk);
// The same, leaving `encoded` as it is.
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
