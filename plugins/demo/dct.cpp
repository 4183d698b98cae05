#include "demo/dct.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>

#include "demo/fast_dct.h"
#include "demo/topk.h"
#include "exogym/modules/internal/cpu_dispatch.h"
#include "exogym/sdk/check.h"
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

DctTransform::~DctTransform() = default;

const at::Tensor& DctTransform::basis(int64_t n, const at::Tensor& like) {
  auto key = std::make_tuple(n, static_cast<int>(like.scalar_type()), like.device().str());
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, dct_basis(n, like.scalar_type(), like.device())).first;
  return it->second;
}

const detail::DctPlan& DctTransform::plan(int64_t n) {
  auto& slot = plans_[n];
  if (!slot) slot = std::make_unique<detail::DctPlan>(n);
  return *slot;
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

// Tiles smaller than this along either axis are encoded with matrix
// products: the fast DCT's passes would be too short to pay.
constexpr int64_t kFastMinChunk = 8;

// The orthonormal factors applied to a tile of fast-DCT coefficients:
// out = scale * coefficients, and the momentum's update
// tile = decay * tile + lr * (scale * coefficients).
EXOGYM_CLONED void scale_tile(const float* scale, const float* coefficients, float* out, int64_t length) {
  for (int64_t i = 0; i < length; ++i) out[i] = scale[i] * coefficients[i];
}

EXOGYM_CLONED void decay_and_add_scaled(float* tile, float decay, float lr, const float* scale,
                                        const float* coefficients, int64_t length) {
  for (int64_t i = 0; i < length; ++i) tile[i] = decay * tile[i] + lr * (scale[i] * coefficients[i]);
}

}  // namespace

std::vector<int64_t> DctTransform::encoded_shape(at::IntArrayRef shape) const {
  const auto t = transform_shape(shape);
  if (t.size() == 1) {
    const int64_t n = chunk_size(t[0], target_);
    return {t[0] / n, n};
  }
  const int64_t n1 = chunk_size(t[0], target_), n2 = chunk_size(t[1], target_);
  return {t[0] / n1, t[1] / n2, n2, n1};
}

bool DctTransform::fast_path(const at::Tensor& x, at::IntArrayRef tshape) const {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && tshape.size() == 2 &&
         chunk_size(tshape[0], target_) >= kFastMinChunk && chunk_size(tshape[1], target_) >= kFastMinChunk;
}

void DctTransform::encode_tile_row(const float* x, int64_t C, int64_t y, int64_t n1, int64_t n2) {
  const detail::DctPlan& rows = plan(n1);
  const detail::DctPlan& columns = plan(n2);
  const size_t need = static_cast<size_t>(2 * n1 * C + std::max(rows.scratch_floats(), columns.scratch_floats()));
  if (scratch_.size() < need) scratch_.resize(need);
  if (block_.size() < static_cast<size_t>(n1 * C)) block_.resize(n1 * C);
  float* along_rows = scratch_.data();      // n1 x C
  float* transposed = along_rows + n1 * C;  // C x n1
  float* rest = transposed + n1 * C;
  // Along the rows of every tile of the row at once (each step of the
  // transform a pass over all C columns), then, transposed, along the
  // columns of each tile (passes over n1 values).
  rows.apply(x + y * n1 * C, C, along_rows, C, C, rest);
  detail::transpose(along_rows, C, transposed, n1, n1, C);
  for (int64_t xi = 0; xi < C / n2; ++xi)
    columns.apply(transposed + xi * n2 * n1, n1, block_.data() + xi * n2 * n1, n1, n1, rest);
  // The orthonormal factors of each coefficient: [b][a] -> s2[b] * s1[a].
  if (scale_.size() < static_cast<size_t>(n1 * n2)) scale_.resize(n1 * n2);
  for (int64_t b = 0; b < n2; ++b)
    for (int64_t a = 0; a < n1; ++a) scale_[b * n1 + a] = columns.orthonormal_scale(b) * rows.orthonormal_scale(a);
}

at::Tensor DctTransform::encode_matmul(const at::Tensor& x) {
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
  // X[y,h,x,w] -> tiles T[y,x,h,w]; E = D1 · T · D2ᵀ per tile, stored [b][a].
  at::Tensor tiles = x.reshape({R / n1, n1, C / n2, n2}).permute({0, 2, 1, 3});
  return at::matmul(at::matmul(D1, tiles), D2.t()).transpose(-1, -2).contiguous();
}

void DctTransform::for_each_tile(const at::Tensor& x, const std::function<void(int64_t, const float*)>& visit) {
  const auto tshape = transform_shape(x.sizes());
  const int64_t R = tshape[0], C = tshape[1];
  const int64_t n1 = chunk_size(R, target_), n2 = chunk_size(C, target_);
  const at::Tensor source = x.contiguous();
  for (int64_t y = 0, t = 0; y < R / n1; ++y) {
    encode_tile_row(source.data_ptr<float>(), C, y, n1, n2);
    for (int64_t xi = 0; xi < C / n2; ++xi, ++t) visit(t, block_.data() + xi * n1 * n2);
  }
}

at::Tensor DctTransform::encode(const at::Tensor& x) {
  if (!fast_path(x, transform_shape(x.sizes()))) return encode_matmul(x);
  at::Tensor out = at::empty(encoded_shape(x.sizes()), x.options());
  const int64_t length = out.size(2) * out.size(3);
  float* o = out.data_ptr<float>();
  for_each_tile(x, [&](int64_t t, const float* coefficients) {
    scale_tile(scale_.data(), coefficients, o + t * length, length);
  });
  return out;
}

at::Tensor DctTransform::decode(const at::Tensor& encoded, at::IntArrayRef shape) {
  const auto tshape = transform_shape(shape);
  if (tshape.size() == 1) {
    const int64_t n = encoded.size(-1);
    const at::Tensor& D = basis(n, encoded);
    return at::matmul(encoded, D).reshape(shape);
  }
  const int64_t n2 = encoded.size(2), n1 = encoded.size(3);
  const at::Tensor& D1 = basis(n1, encoded);
  const at::Tensor& D2 = basis(n2, encoded);
  // [b][a] -> [a][b], then T = D1ᵀ · E · D2 per tile.
  at::Tensor tiles = at::matmul(at::matmul(D1.t(), encoded.transpose(-1, -2)), D2);  // (Y, X, n1, n2)
  return tiles.permute({0, 2, 1, 3}).reshape(shape);
}

namespace {

std::vector<int64_t> rows_shape(at::IntArrayRef encoded_shape) {
  if (encoded_shape.size() == 4) return {encoded_shape[0], encoded_shape[1], encoded_shape[2] * encoded_shape[3]};
  return encoded_shape.vec();
}

}  // namespace

Compressed DctTransform::accumulate_and_extract(at::Tensor& encoded_delta, const at::Tensor& grad, double decay,
                                                double lr, int64_t topk) {
  const bool fused = grad.defined() && fast_path(grad, transform_shape(grad.sizes())) &&
                     encoded_delta.is_contiguous() && encoded_delta.scalar_type() == at::kFloat;
  if (!fused) {
    encoded_delta.mul_(decay);
    if (grad.defined()) encoded_delta.add_(encode(grad), lr);
    return extract_topk(encoded_delta, topk);
  }
  // Tile by tile while it is in cache: the momentum's update, then the
  // selection of what to send.
  const int64_t length = encoded_delta.size(2) * encoded_delta.size(3);
  detail::TopkSelection selection({encoded_delta.size(0), encoded_delta.size(1)}, length, topk,
                                  encoded_delta.options());
  const float d = static_cast<float>(decay), l = static_cast<float>(lr);
  float* delta = encoded_delta.data_ptr<float>();
  for_each_tile(grad, [&](int64_t t, const float* coefficients) {
    float* tile = delta + t * length;
    decay_and_add_scaled(tile, d, l, scale_.data(), coefficients, length);
    selection.take(t, tile);
  });
  return selection.result();
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
