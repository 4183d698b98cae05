#include "exogym/modules/dct.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

#include "exogym/sdk/error.h"

namespace exogym::modules::demo {

int64_t chunk_size(int64_t size, int64_t target) {
  EXOGYM_CHECK_INTERNAL(!(size < 1 || target < 1), "chunk_size: size and target must be positive");
  // Equal to the reference's walk over the sorted divisors (return the one
  // equal to the target, else the last one below the first one above it).
  for (int64_t d = std::min(size, target); d > 1; --d)
    if (size % d == 0) return d;
  return 1;
}

at::Tensor dct_basis(int64_t n, at::ScalarType dtype, c10::Device device) {
  auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor k = at::arange(n, opts).unsqueeze(1);  // rows: frequency
  at::Tensor j = at::arange(n, opts).unsqueeze(0);  // columns: sample
  at::Tensor D = at::cos(k * (2 * j + 1) * (M_PI / (2.0 * static_cast<double>(n))));
  D.mul_(std::sqrt(2.0 / static_cast<double>(n)));
  D[0].fill_(std::sqrt(1.0 / static_cast<double>(n)));
  return D.to(device, dtype).contiguous();
}

DctTransform::DctTransform(int64_t target_chunk) : target_(target_chunk) {
  EXOGYM_CHECK_INTERNAL(target_chunk >= 1, "DctTransform: the chunk size must be positive");
}

const at::Tensor& DctTransform::basis(int64_t n, const at::Tensor& like) {
  auto key = std::make_tuple(n, static_cast<int>(like.scalar_type()), like.device().str());
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, dct_basis(n, like.scalar_type(), like.device())).first;
  return it->second;
}

namespace {

// The 2-D shape a parameter is transformed as: 0-D/1-D stay 1-D; more than
// two dimensions are flattened to (d0, d1*d2*...), e.g. a convolution kernel
// (out, in, kh, kw) becomes (out, in*kh*kw).
std::vector<int64_t> transform_shape(at::IntArrayRef shape) {
  if (shape.size() <= 1) return {shape.empty() ? 1 : shape[0]};
  int64_t rest = 1;
  for (size_t i = 1; i < shape.size(); ++i) rest *= shape[i];
  return {shape[0], rest};
}

}  // namespace

at::Tensor DctTransform::encode(const at::Tensor& x) {
  const auto shape = transform_shape(x.sizes());
  if (shape.size() == 1) {
    const int64_t N = shape[0], n = chunk_size(N, target_);
    const at::Tensor& D = basis(n, x);
    // Row r holds chunk r; e = D·chunk for each row, i.e. rows · Dᵀ.
    return at::matmul(x.reshape({N / n, n}), D.t());
  }
  const int64_t R = shape[0], C = shape[1];
  const int64_t n1 = chunk_size(R, target_), n2 = chunk_size(C, target_);
  const at::Tensor& D1 = basis(n1, x);
  const at::Tensor& D2 = basis(n2, x);
  // X[y,h,x,w] -> tiles T[y,x,h,w]; E = D1 · T · D2ᵀ per tile.
  at::Tensor tiles = x.reshape({R / n1, n1, C / n2, n2}).permute({0, 2, 1, 3});
  return at::matmul(at::matmul(D1, tiles), D2.t()).contiguous();
}

at::Tensor DctTransform::decode(const at::Tensor& encoded, at::IntArrayRef shape) {
  const auto tshape = transform_shape(shape);
  if (tshape.size() == 1) {
    const int64_t n = encoded.size(-1);
    const at::Tensor& D = basis(n, encoded);
    return at::matmul(encoded, D).reshape(shape);
  }
  const int64_t n1 = encoded.size(2), n2 = encoded.size(3);
  const at::Tensor& D1 = basis(n1, encoded);
  const at::Tensor& D2 = basis(n2, encoded);
  at::Tensor tiles = at::matmul(at::matmul(D1.t(), encoded), D2);  // (Y, X, n1, n2)
  return tiles.permute({0, 2, 1, 3}).reshape(shape);
}

namespace {

// The encoding with each chunk's coefficients on the last axis.
at::Tensor chunk_rows(const at::Tensor& encoded) {
  if (encoded.dim() == 4) return encoded.reshape({encoded.size(0), encoded.size(1), -1});
  return encoded;
}

std::vector<int64_t> rows_shape(at::IntArrayRef encoded_shape) {
  if (encoded_shape.size() == 4) return {encoded_shape[0], encoded_shape[1], encoded_shape[2] * encoded_shape[3]};
  return encoded_shape.vec();
}

}  // namespace

Compressed compress(const at::Tensor& encoded, int64_t topk) {
  at::Tensor rows = chunk_rows(encoded);
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(topk, rows.size(-1)));
  at::Tensor idx = std::get<1>(at::topk(rows.abs(), k, /*dim=*/-1, /*largest=*/true, /*sorted=*/false));
  at::Tensor val = at::gather(rows, -1, idx);
  return {idx, val};
}

at::Tensor decompress(const at::Tensor& idx, const at::Tensor& val, at::IntArrayRef encoded_shape) {
  at::Tensor rows = at::zeros(rows_shape(encoded_shape), val.options());
  rows.scatter_(-1, idx, val);
  return rows.reshape(encoded_shape);
}

at::Tensor batch_decompress(const std::vector<at::Tensor>& idx, const std::vector<at::Tensor>& val,
                            at::IntArrayRef encoded_shape) {
  EXOGYM_CHECK_INTERNAL(!(idx.empty() || idx.size() != val.size()),
                        "batch_decompress: expected as many index as value tensors, at least one");
  // Within one message the indices are distinct (top-k), so each scatter_add
  // touches every position at most once; messages are added in list order.
  // Both make the sums, hence the means, deterministic (the reference's
  // scatter_reduce "mean" was not, on CUDA).
  at::Tensor sum = at::zeros(rows_shape(encoded_shape), val.front().options());
  at::Tensor count = at::zeros_like(sum);
  for (size_t i = 0; i < idx.size(); ++i) {
    sum.scatter_add_(-1, idx[i], val[i]);
    count.scatter_add_(-1, idx[i], at::ones_like(val[i]));
  }
  return sum.div_(count.clamp_min_(1)).reshape(encoded_shape);
}

}  // namespace exogym::modules::demo
