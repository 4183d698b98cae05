#pragma once
// Random-k as a compressor (compressor.h): in every chunk, the values at
// k(L) = ceil(density * L) positions drawn from the shared seed, the same
// on every node, so no position is sent (docs/compression.md#random-k).
// The values are sent as they are (not scaled by L / k): random-k is meant
// for use with error feedback (error_feedback.h), which keeps what
// was not sent.
//
// Chunks and k(L) as chunk_topk.h's (the last chunk may be shorter). Chunk
// c's positions are k(L) distinct offsets drawn by Floyd's algorithm from a
// splitmix64 stream seeded with sdk::derive_seed(shared_seed, c), in
// ascending order: this library's own generator, so the positions are the
// same with any LibTorch.
//
// What a node sends of a tensor of N values, m = topk_count(N, chunk,
// density), C = ceil(N / chunk): the values, fp32: 4m bytes; or a low-bit
// format: packed_bytes(format, m) + 4C bytes (one scale per chunk, as
// topk_compressor.h). Without quantisation it is summable(): every node's
// values sit at the same positions, so compressed_mean all-reduces them.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "exogym/modules/compression/compressor.h"
#include "exogym/sdk/quantize.h"

namespace exogym::modules {

class RandomKCompressor final : public Compressor {
 public:
  // Throws sdk::Error for a chunk outside 1 .. 2^31 or a density outside (0, 1].
  RandomKCompressor(int64_t chunk, double density, std::optional<sdk::QuantFormat> quant);

  CompressedTensor compress(const at::Tensor& tensor, uint64_t shared_seed) const override;
  void add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t shared_seed) const override;
  int64_t bytes(int64_t numel) const override;
  bool summable() const override { return !quant_; }
  std::string describe() const override;

  // The flat positions (int64, ascending) a tensor of `numel` values sends.
  at::Tensor positions(int64_t numel, uint64_t shared_seed) const;

 private:
  int64_t chunk_;
  double density_;
  std::optional<sdk::QuantFormat> quant_;
};

}  // namespace exogym::modules
