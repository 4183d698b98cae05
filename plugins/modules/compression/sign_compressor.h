#pragma once
// Scaled sign as a compressor (compressor.h): one bit per value, its sign,
// and one fp32 scale per block, the block's mean magnitude, so that a value
// decodes to ±(mean |x| of its block): the compressor of EF-signSGD
// (Karimireddy et al. 2019), to be used with error feedback
// (error_feedback.h) (docs/compression.md#scaled-sign).
//
// Blocks of `block` consecutive values of the tensor read flat (the last may
// be shorter). Bit i of the payload (bit i % 8 of byte i / 8) is 1 when
// value i is negative (a -0.0 too) and 0 otherwise, so a zero decodes to
// +scale. The scale is the block's Σ|x| / n, summed in order in fp32: a
// block holding a NaN or an infinity gets a non-finite scale, so the
// non-finite value is not hidden.
//
// What a node sends of a tensor of N values: ceil(N / 8) bytes of signs
// and 4 * ceil(N / block) bytes of scales. The wire holds (signs, scales).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "exogym/modules/compression/compressor.h"

namespace exogym::modules {

class SignCompressor final : public Compressor {
 public:
  // Throws sdk::Error for a block below 1.
  explicit SignCompressor(int64_t block);

  CompressedTensor compress(const at::Tensor& tensor, uint64_t shared_seed = 0) const override;
  void add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t shared_seed = 0) const override;
  int64_t bytes(int64_t numel) const override;
  std::string describe() const override;

 private:
  int64_t block_;
};

}  // namespace exogym::modules
