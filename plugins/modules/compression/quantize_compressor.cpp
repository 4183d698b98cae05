#include "exogym/modules/compression/quantize_compressor.h"

#include <ATen/ATen.h>

#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::modules {

QuantizeCompressor::QuantizeCompressor(sdk::QuantFormat format, int64_t block) : format_(format), block_(block) {
  if (block < 1) throw sdk::Error("quantize compressor: a block of " + std::to_string(block) + " values is below 1");
}

CompressedTensor QuantizeCompressor::compress(const at::Tensor& tensor, uint64_t /*shared_seed*/) const {
  sdk::QuantizedPayload q = sdk::quantize(tensor.reshape({-1}), format_, block_);
  return {{q.codes, q.scales}};
}

void QuantizeCompressor::add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t /*shared_seed*/) const {
  EXOGYM_CHECK_INTERNAL(dense.scalar_type() == at::kFloat && dense.is_contiguous() && dense.device().is_cpu(),
                        "add_to adds into a contiguous fp32 CPU tensor");
  if (payload.wire.size() != 2) throw sdk::Error("quantized payload: expected codes and scales");
  sdk::QuantizedPayload q;
  q.format = format_;
  q.block_size = block_;
  q.shape = {dense.numel()};
  q.codes = payload.wire[0];
  q.scales = payload.wire[1];
  dense.add_(sdk::dequantize_float(q));
}

int64_t QuantizeCompressor::bytes(int64_t numel) const { return sdk::quantized_bytes(format_, numel, block_); }

std::string QuantizeCompressor::describe() const {
  return std::string(sdk::to_string(format_)) + ", one scale per " + std::to_string(block_) + " values";
}

}  // namespace exogym::modules
