#include "topk.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "cpu_dispatch.h"
#include "exogym/sdk/error.h"

namespace exogym::modules::demo {

namespace detail {

namespace {

// Magnitudes are compared as the bits of |x|: for floats that are not NaN
// the order is the same, and a NaN (bits above infinity's) counts as the
// largest, as in torch.topk, so that a non-finite update is sent and seen.
EXOGYM_INLINE uint32_t magnitude_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits & 0x7fffffffu;
}

// A lower bound of the k-th largest of keys[0..n) (k <= n), found bit by
// bit from the top: the largest v with at least k keys >= v whose bits
// below `lowest_bit` are 0 (lowest_bit 0: the k-th largest itself). Each
// step is a count, a vectorised pass without branches (a selection
// algorithm would mispredict a branch per comparison on these short
// arrays).
EXOGYM_INLINE uint32_t kth_largest(const uint32_t* keys, int64_t n, int64_t k, int lowest_bit) {
  uint32_t v = 0;
  for (int bit = 30; bit >= lowest_bit; --bit) {
    const uint32_t candidate = v | (1u << bit);
    int32_t count = 0;  // 32-bit lanes: keys and counts in the same vector width
    for (int64_t i = 0; i < n; ++i) count += keys[i] >= candidate;
    if (count >= k) v = candidate;
  }
  return v;
}

// Magnitudes are bounded in blocks of this many coefficients first.
constexpr int64_t kBlock = 16;
// The bound from the blocks' maxima keeps the exponent and this many bits
// of the mantissa: close enough to leave few extra candidates, in 12
// counting passes instead of 31.
constexpr int kBoundMantissaBits = 4;

// The k largest magnitudes of `row` (of equal ones, the lower positions),
// in ascending positions into idx/val, and set to 0 in `row`. With at
// least k blocks, the k-th largest of the blocks' maxima is at most the
// row's k-th largest magnitude (those k maxima are k coefficients of the
// row), so only the blocks whose maximum reaches a bound below it can hold
// a winner: one pass for the maxima, then a few blocks scanned in order,
// so that the winners come out in ascending positions.
EXOGYM_CLONED void extract_row(float* row, int64_t length, int64_t k, int64_t* idx, float* val,
                               TopkSelection::Scratch& scratch) {
  auto& keys = scratch.keys;
  auto& maxima = scratch.maxima;
  const int64_t blocks = (length + kBlock - 1) / kBlock;
  keys.resize(blocks * kBlock);
  maxima.resize(blocks);
  uint32_t* key = keys.data();
  for (int64_t i = 0; i < length; ++i) key[i] = magnitude_key(row[i]);
  for (int64_t i = length; i < blocks * kBlock; ++i) key[i] = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t m = 0;
    for (int64_t i = 0; i < kBlock; ++i) m = std::max(m, key[b * kBlock + i]);
    maxima[b] = m;
  }
  const uint32_t bound = blocks >= k ? kth_largest(maxima.data(), blocks, k, 23 - kBoundMantissaBits) : 0;
  // The blocks that reach the bound, then their coefficients that do, in
  // ascending positions. Both written without a branch per entry: whether
  // one passes is unpredictable (about one block in six, one coefficient
  // of a passing block in eight), and a mispredicted branch costs more
  // than writing every entry and advancing past the ones that pass.
  scratch.passing.resize(blocks);
  scratch.candidates.resize(blocks * kBlock + 1);
  scratch.candidate_keys.resize(blocks * kBlock + 1);
  int64_t* passing = scratch.passing.data();
  int64_t* candidates = scratch.candidates.data();
  uint32_t* candidate_keys = scratch.candidate_keys.data();
  int64_t passing_blocks = 0, n = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    passing[passing_blocks] = b;
    passing_blocks += maxima[b] >= bound;
  }
  for (int64_t p = 0; p < passing_blocks; ++p) {
    const int64_t start = passing[p] * kBlock;
    for (int64_t i = start; i < start + kBlock; ++i) {
      candidates[n] = i;
      candidate_keys[n] = key[i];
      n += key[i] >= bound;
    }
  }
  // The k-th largest among the candidates; all above it are sent, and of
  // those equal to it the first ones, up to k. (A partial last block is
  // padded with keys of 0: they come after every real position, and
  // k <= length real ones reach any k-th largest, so none is taken.)
  const uint32_t kth = kth_largest(candidate_keys, n, k, 0);
  int64_t equal_ones = k;
  for (int64_t j = 0; j < n; ++j) equal_ones -= candidate_keys[j] > kth;
  scratch.taken.resize(k + 1);
  int64_t* taken_positions = scratch.taken.data();
  int64_t taken = 0;
  for (int64_t j = 0; j < n; ++j) {
    const bool equal = candidate_keys[j] == kth;
    const bool take = candidate_keys[j] > kth || (equal && equal_ones > 0);
    equal_ones -= take && equal;
    taken_positions[taken] = candidates[j];
    taken += take;
  }
  for (int64_t j = 0; j < k; ++j) {
    idx[j] = taken_positions[j];
    val[j] = row[taken_positions[j]];
    row[taken_positions[j]] = 0;
  }
}

}  // namespace

TopkSelection::TopkSelection(std::vector<int64_t> chunks, int64_t length, int64_t topk,
                             const at::TensorOptions& options)
    : length_(length), k_(std::max<int64_t>(1, std::min<int64_t>(topk, length))) {
  chunks.push_back(k_);
  idx_ = at::empty(chunks, options.dtype(at::kLong));
  val_ = at::empty(chunks, options);
}

void TopkSelection::take(int64_t c, float* row) {
  extract_row(row, length_, k_, idx_.data_ptr<int64_t>() + c * k_, val_.data_ptr<float>() + c * k_, scratch_);
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
