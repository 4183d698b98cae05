#include "exogym/modules/compression/chunk_topk.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "exogym/modules/internal/cpu_dispatch.h"
#include "exogym/sdk/error.h"

namespace exogym::modules {

namespace {

constexpr int64_t kMaxChunk = int64_t{1} << 31;

// |x|'s bits: for floats that are not NaN they order as the magnitudes do,
// and a NaN's lie above infinity's, so a NaN counts as the largest (as in
// torch.topk: a non-finite value is sent and seen).
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
template <typename Count>
EXOGYM_INLINE uint32_t kth_largest_counted(const uint32_t* keys, int64_t n, int64_t k, int lowest_bit) {
  uint32_t v = 0;
  for (int bit = 30; bit >= lowest_bit; --bit) {
    const uint32_t candidate = v | (1u << bit);
    Count count = 0;
    for (int64_t i = 0; i < n; ++i) count += keys[i] >= candidate;
    if (count >= k) v = candidate;
  }
  return v;
}

EXOGYM_INLINE uint32_t kth_largest(const uint32_t* keys, int64_t n, int64_t k, int lowest_bit) {
  // 32-bit counts keep keys and counts in the same vector width; a chunk of
  // 2^31 values needs 64.
  if (n <= std::numeric_limits<int32_t>::max()) return kth_largest_counted<int32_t>(keys, n, k, lowest_bit);
  return kth_largest_counted<int64_t>(keys, n, k, lowest_bit);
}

// Magnitudes are bounded in blocks of this many values first.
constexpr int64_t kBlock = 16;
// The bound from the blocks' maxima keeps the exponent and this many bits
// of the mantissa: close enough to leave few extra candidates, in 12
// counting passes instead of 31.
constexpr int kBoundMantissaBits = 4;

// Chunks per parallel task: enough values that a task costs more than its
// dispatch. The results do not depend on it.
int64_t chunk_grain(int64_t chunk) { return std::max<int64_t>(1, (int64_t{1} << 15) / chunk); }

}  // namespace

int64_t topk_per_chunk(int64_t length, double density) {
  if (length <= 0) return 0;
  // density * length within rounding of an integer is that integer: 0.03 *
  // 100 must keep 3, not ceil(3.0000000000000004) = 4.
  const double exact = density * static_cast<double>(length), nearest = std::round(exact);
  const double k = std::fabs(exact - nearest) <= 1e-9 * std::max(1.0, exact) ? nearest : std::ceil(exact);
  return std::clamp<int64_t>(static_cast<int64_t>(k), 1, length);
}

void check_chunk_settings(int64_t chunk, double density) {
  if (chunk < 1 || chunk > kMaxChunk) {
    throw sdk::Error("chunk top-k: a chunk of " + std::to_string(chunk) + " values is outside 1 .. 2^31");
  }
  if (!(density > 0 && density <= 1)) {
    throw sdk::Error("chunk top-k: density " + std::to_string(density) + " is outside (0, 1]");
  }
}

int64_t chunk_count(int64_t numel, int64_t chunk) { return (numel + chunk - 1) / chunk; }

int64_t topk_count(int64_t numel, int64_t chunk, double density) {
  return numel / chunk * topk_per_chunk(chunk, density) + topk_per_chunk(numel % chunk, density);
}

c10::ScalarType chunk_index_dtype(int64_t chunk) {
  if (chunk <= 256) return at::kByte;
  if (chunk <= 32768) return at::kShort;
  return at::kInt;
}

int64_t chunk_index_bytes(int64_t chunk) { return static_cast<int64_t>(c10::elementSize(chunk_index_dtype(chunk))); }

// With at least k blocks, the k-th largest of the blocks' maxima is at most
// the row's k-th largest magnitude (those k maxima are k values of the
// row), so only the blocks whose maximum reaches a bound below it can hold
// one of the k: one pass for the maxima, then those blocks scanned in
// order, so that the offsets come out ascending.
EXOGYM_CLONED void select_topk(const float* row, int64_t length, int64_t k, int64_t* offsets, TopkScratch& scratch) {
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
  // The blocks that reach the bound, then their values that do, in
  // ascending offsets. Both written without a branch per entry: whether
  // one passes is unpredictable, and a mispredicted branch costs more than
  // writing every entry and advancing past the ones that pass.
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
  // The k-th largest among the candidates; all above it are kept, and of
  // those equal to it the first ones, up to k. (A partial last block is
  // padded with keys of 0: they come after every real offset, and k <=
  // length real ones reach any k-th largest, so none is taken.)
  const uint32_t kth = kth_largest(candidate_keys, n, k, 0);
  int64_t equal_ones = k;
  for (int64_t j = 0; j < n; ++j) equal_ones -= candidate_keys[j] > kth;
  scratch.taken.resize(k + 1);
  int64_t* taken_offsets = scratch.taken.data();
  int64_t taken = 0;
  for (int64_t j = 0; j < n; ++j) {
    const bool equal = candidate_keys[j] == kth;
    const bool take = candidate_keys[j] > kth || (equal && equal_ones > 0);
    equal_ones -= take && equal;
    taken_offsets[taken] = candidates[j];
    taken += take;
  }
  std::copy(taken_offsets, taken_offsets + k, offsets);
}

ChunkTopK chunk_topk(const at::Tensor& tensor, int64_t chunk, double density) {
  check_chunk_settings(chunk, density);
  const at::Tensor x = tensor.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
  const int64_t n = x.numel(), chunks = chunk_count(n, chunk), k = topk_per_chunk(chunk, density);
  const int64_t count = topk_count(n, chunk, density);
  // Offsets as int32 first (every offset fits: chunk <= 2^31), narrowed once.
  at::Tensor offsets = at::empty({count}, at::kInt);
  at::Tensor values = at::empty({count}, at::kFloat);
  const float* in = x.data_ptr<float>();
  int32_t* out_index = offsets.data_ptr<int32_t>();
  float* out_value = values.data_ptr<float>();
  at::parallel_for(0, chunks, chunk_grain(chunk), [&](int64_t begin, int64_t end) {
    TopkScratch scratch;
    std::vector<int64_t> kept_offsets(static_cast<size_t>(k));
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * chunk, length = std::min(chunk, n - first), kept = topk_per_chunk(length, density);
      select_topk(in + first, length, kept, kept_offsets.data(), scratch);
      // Every chunk before c is full and kept k.
      for (int64_t j = 0; j < kept; ++j) {
        out_index[c * k + j] = static_cast<int32_t>(kept_offsets[j]);
        out_value[c * k + j] = in[first + kept_offsets[j]];
      }
    }
  });
  return {offsets.to(chunk_index_dtype(chunk)), values};
}

at::Tensor chunk_positions(const at::Tensor& indices, int64_t numel, int64_t chunk, double density) {
  check_chunk_settings(chunk, density);
  const int64_t count = topk_count(numel, chunk, density), k = topk_per_chunk(chunk, density);
  if (!indices.defined() || indices.dim() != 1 || indices.numel() != count) {
    throw sdk::Error("chunk top-k: expected " + std::to_string(count) + " offsets for " + std::to_string(numel) +
                     " values in chunks of " + std::to_string(chunk));
  }
  const at::Tensor offsets = indices.to(at::kCPU, at::kLong).contiguous();
  at::Tensor positions = at::empty({count}, at::kLong);
  const int64_t* in = offsets.data_ptr<int64_t>();
  int64_t* out = positions.data_ptr<int64_t>();
  for (int64_t j = 0; j < count; ++j) {
    const int64_t c = j / k, first = c * chunk, length = std::min(chunk, numel - first);
    if (in[j] < 0 || in[j] >= length) {
      throw sdk::Error("chunk top-k: offset " + std::to_string(in[j]) + " outside chunk " + std::to_string(c) + " of " +
                       std::to_string(length) + " values");
    }
    out[j] = first + in[j];
  }
  return positions;
}

}  // namespace exogym::modules
