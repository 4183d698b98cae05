#include "exogym/modules/chunk_topk.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "exogym/sdk/error.h"

namespace exogym::modules {

namespace {

constexpr int64_t kMaxChunk = int64_t{1} << 31;

// |x|'s bits: for floats that are not NaN they order as the magnitudes do,
// and a NaN's lie above infinity's, so a NaN counts as the largest.
uint32_t magnitude_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits & 0x7fffffffu;
}

// The offsets of the k largest magnitudes of row[0..n), ascending, into
// order[0..k). Larger key first, then lower offset: a strict total order,
// so the set kept is unique whatever nth_element does inside.
void select_chunk(const float* row, int64_t n, int64_t k, std::vector<int64_t>& order) {
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  auto before = [row](int64_t a, int64_t b) {
    const uint32_t ka = magnitude_key(row[a]), kb = magnitude_key(row[b]);
    return ka != kb ? ka > kb : a < b;
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
  std::sort(order.begin(), order.begin() + k);
}

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
    std::vector<int64_t> order;
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * chunk, length = std::min(chunk, n - first), kept = topk_per_chunk(length, density);
      select_chunk(in + first, length, kept, order);
      // Every chunk before c is full and kept k.
      for (int64_t j = 0; j < kept; ++j) {
        out_index[c * k + j] = static_cast<int32_t>(order[j]);
        out_value[c * k + j] = in[first + order[j]];
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
