#include "demo/topk.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::modules::demo {

namespace detail {

TopkSelection::TopkSelection(std::vector<int64_t> chunks, int64_t length, int64_t topk,
                             const at::TensorOptions& options)
    : length_(length), k_(std::max<int64_t>(1, std::min<int64_t>(topk, length))) {
  chunks.push_back(k_);
  idx_ = at::empty(chunks, options.dtype(at::kLong));
  val_ = at::empty(chunks, options);
}

void TopkSelection::take(int64_t c, float* row) {
  int64_t* idx = idx_.data_ptr<int64_t>() + c * k_;
  float* val = val_.data_ptr<float>() + c * k_;
  select_topk(row, length_, k_, idx, scratch_);
  for (int64_t j = 0; j < k_; ++j) {
    val[j] = row[idx[j]];
    row[idx[j]] = 0;
  }
}

}  // namespace detail

namespace {

// The encoding with each chunk's coefficients on the last axis.
at::Tensor chunk_rows(const at::Tensor& encoded) {
  if (encoded.dim() == 4) return encoded.view({encoded.size(0), encoded.size(1), -1});
  return encoded;
}

}  // namespace

Compressed extract_topk(at::Tensor& encoded, int64_t topk) {
  EXOGYM_CHECK_INTERNAL(encoded.is_contiguous(), "extract_topk: the encoding must be contiguous");
  at::Tensor rows = chunk_rows(encoded);
  const int64_t length = rows.size(-1);
  const at::IntArrayRef sizes = rows.sizes();
  detail::TopkSelection selection(sizes.slice(0, sizes.size() - 1).vec(), length, topk, encoded.options());
  if (!(encoded.device().is_cpu() && encoded.scalar_type() == at::kFloat)) {
    // Elsewhere (a GPU): the same selection with ATen's operators.
    at::Tensor idx = std::get<0>(
        std::get<1>(at::topk(rows.abs(), selection.k(), /*dim=*/-1, /*largest=*/true, /*sorted=*/false)).sort(-1));
    at::Tensor val = at::gather(rows, -1, idx);
    rows.scatter_(-1, idx, 0.0);
    return {idx, val};
  }
  float* data = rows.data_ptr<float>();
  for (int64_t c = 0; c < rows.numel() / length; ++c) selection.take(c, data + c * length);
  return selection.result();
}

Compressed compress(const at::Tensor& encoded, int64_t topk) {
  at::Tensor copy = encoded.contiguous().clone();
  return extract_topk(copy, topk);
}

}  // namespace exogym::modules::demo
