#include "exogym/modules/compression/sign_compressor.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::modules {

SignCompressor::SignCompressor(int64_t block) : block_(block) {
  if (block < 1) throw sdk::Error("sign compressor: a block of " + std::to_string(block) + " values is below 1");
}

CompressedTensor SignCompressor::compress(const at::Tensor& tensor, uint64_t /*shared_seed*/) const {
  const at::Tensor x = tensor.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
  const int64_t n = x.numel(), blocks = (n + block_ - 1) / block_;
  at::Tensor signs = at::zeros({(n + 7) / 8}, at::kByte);
  at::Tensor scales = at::empty({blocks}, at::kFloat);
  const float* in = x.data_ptr<float>();
  uint8_t* bits = signs.data_ptr<uint8_t>();
  float* scale = scales.data_ptr<float>();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * block_, last = std::min(n, first + block_);
    float sum = 0;
    for (int64_t i = first; i < last; ++i) {
      sum += std::fabs(in[i]);
      if (std::signbit(in[i])) bits[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
    }
    scale[b] = sum / static_cast<float>(last - first);
  }
  return {{signs, scales}};
}

void SignCompressor::add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t /*shared_seed*/) const {
  EXOGYM_CHECK_INTERNAL(dense.scalar_type() == at::kFloat && dense.is_contiguous() && dense.device().is_cpu(),
                        "add_to adds into a contiguous fp32 CPU tensor");
  const int64_t n = dense.numel(), blocks = (n + block_ - 1) / block_;
  if (payload.wire.size() != 2 || payload.wire[0].numel() != (n + 7) / 8 ||
      payload.wire[0].scalar_type() != at::kByte || payload.wire[1].numel() != blocks ||
      payload.wire[1].scalar_type() != at::kFloat) {
    throw sdk::Error("sign payload: expected " + std::to_string((n + 7) / 8) + " bytes of signs and " +
                     std::to_string(blocks) + " fp32 scales for " + std::to_string(n) + " values");
  }
  const at::Tensor signs = payload.wire[0].contiguous(), scales = payload.wire[1].contiguous();
  const uint8_t* bits = signs.data_ptr<uint8_t>();
  const float* scale = scales.data_ptr<float>();
  float* out = dense.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float s = scale[i / block_];
    out[i] += ((bits[i >> 3] >> (i & 7)) & 1u) ? -s : s;
  }
}

int64_t SignCompressor::bytes(int64_t numel) const { return (numel + 7) / 8 + 4 * ((numel + block_ - 1) / block_); }

std::string SignCompressor::describe() const { return "sign, one scale per " + std::to_string(block_) + " values"; }

}  // namespace exogym::modules
