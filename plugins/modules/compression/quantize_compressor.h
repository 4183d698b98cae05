#pragma once
// A low-bit format as a compressor (compressor.h): every value quantised
// with sdk::quantize, one fp32 scale per block (sdk/quantize.h, the formats
// Streaming DiLoCo sends) (docs/compression.md#formats).
//
// What a node sends of a tensor of N values: sdk::quantized_bytes(format, N,
// block). The wire holds (codes, scales).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "exogym/modules/compression/compressor.h"
#include "exogym/sdk/quantize.h"

namespace exogym::modules {

class QuantizeCompressor final : public Compressor {
 public:
  // Throws sdk::Error for a block below 1.
  explicit QuantizeCompressor(sdk::QuantFormat format, int64_t block = sdk::kDefaultQuantBlock);

  CompressedTensor compress(const at::Tensor& tensor, uint64_t shared_seed = 0) const override;
  void add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t shared_seed = 0) const override;
  int64_t bytes(int64_t numel) const override;
  std::string describe() const override;
  std::optional<DenseQuantization> dense_quantization() const override { return DenseQuantization{format_, block_}; }

 private:
  sdk::QuantFormat format_;
  int64_t block_;
};

}  // namespace exogym::modules
