#include "exogym/modules/compression/random_k.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "exogym/modules/compression/chunk_topk.h"
#include "exogym/modules/internal/kept_values.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::modules {

namespace {

// splitmix64: a small generator whose numbers are fixed by this file, not
// by the LibTorch version.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n): the high half of a 64 x 64-bit product (Lemire),
  // biased by at most n / 2^64.
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

RandomKCompressor::RandomKCompressor(int64_t chunk, double density, std::optional<sdk::QuantFormat> quant)
    : chunk_(chunk), density_(density), quant_(quant) {
  check_chunk_settings(chunk_, density_);
}

at::Tensor RandomKCompressor::positions(int64_t numel, uint64_t shared_seed) const {
  const int64_t chunks = chunk_count(numel, chunk_);
  at::Tensor out = at::empty({topk_count(numel, chunk_, density_)}, at::kLong);
  int64_t* next = out.data_ptr<int64_t>();
  std::vector<char> taken(static_cast<size_t>(std::min(chunk_, numel)), 0);
  std::vector<int64_t> drawn;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * chunk_, length = std::min(chunk_, numel - first), k = topk_per_chunk(length, density_);
    SplitMix64 random(sdk::derive_seed(shared_seed, static_cast<uint64_t>(c)));
    // Floyd: k distinct offsets of [0, length), each k-subset equally likely.
    drawn.clear();
    for (int64_t j = length - k; j < length; ++j) {
      const int64_t t = random.below(j + 1);
      const int64_t pick = taken[static_cast<size_t>(t)] ? j : t;
      taken[static_cast<size_t>(pick)] = 1;
      drawn.push_back(pick);
    }
    std::sort(drawn.begin(), drawn.end());
    for (int64_t offset : drawn) {
      taken[static_cast<size_t>(offset)] = 0;
      *next++ = first + offset;
    }
  }
  return out;
}

CompressedTensor RandomKCompressor::compress(const at::Tensor& tensor, uint64_t shared_seed) const {
  const at::Tensor flat = tensor.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
  const at::Tensor values = flat.index_select(0, positions(flat.numel(), shared_seed));
  return {detail::encode_kept(values, quant_, topk_per_chunk(chunk_, density_))};
}

void RandomKCompressor::add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t shared_seed) const {
  const at::Tensor at = positions(dense.numel(), shared_seed);
  const at::Tensor values = detail::decode_kept(payload.wire, 0, at.numel(), chunk_count(dense.numel(), chunk_), quant_,
                                                topk_per_chunk(chunk_, density_));
  detail::scatter_add_values(dense, at, values);
}

int64_t RandomKCompressor::bytes(int64_t numel) const {
  return detail::kept_bytes(topk_count(numel, chunk_, density_), chunk_count(numel, chunk_), quant_);
}

std::string RandomKCompressor::describe() const {
  return detail::describe_sparse("random-k", density_, chunk_, quant_);
}

}  // namespace exogym::modules
