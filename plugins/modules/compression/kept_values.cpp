#include "exogym/modules/internal/kept_values.h"

#include <ATen/ATen.h>

#include <sstream>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::modules::detail {

std::vector<at::Tensor> encode_kept(const at::Tensor& values, const std::optional<sdk::QuantFormat>& quant,
                                    int64_t per_chunk) {
  if (!quant) return {values};
  sdk::QuantizedPayload q = sdk::quantize(values, *quant, per_chunk);
  return {q.codes, q.scales};
}

at::Tensor decode_kept(const std::vector<at::Tensor>& wire, size_t first, int64_t count, int64_t chunks,
                       const std::optional<sdk::QuantFormat>& quant, int64_t per_chunk) {
  if (wire.size() < first + kept_wire_count(quant)) {
    throw sdk::Error("compressed payload: " + std::to_string(wire.size()) + " tensors, expected " +
                     std::to_string(first + kept_wire_count(quant)));
  }
  if (!quant) {
    const at::Tensor& values = wire[first];
    if (values.numel() != count || values.scalar_type() != at::kFloat) {
      throw sdk::Error("compressed payload: " + std::to_string(values.numel()) + " values, expected " +
                       std::to_string(count) + " fp32 values");
    }
    return values.to(at::kCPU).contiguous();
  }
  if (wire[first + 1].numel() != chunks) {
    throw sdk::Error("compressed payload: expected " + std::to_string(chunks) + " scales, one per chunk");
  }
  sdk::QuantizedPayload q;
  q.format = *quant;
  q.block_size = per_chunk;
  q.shape = {count};
  q.codes = wire[first];
  q.scales = wire[first + 1];
  return sdk::dequantize_float(q).contiguous();
}

int64_t kept_bytes(int64_t count, int64_t chunks, const std::optional<sdk::QuantFormat>& quant) {
  return quant ? sdk::packed_bytes(*quant, count) + 4 * chunks : 4 * count;
}

size_t kept_wire_count(const std::optional<sdk::QuantFormat>& quant) { return quant ? 2 : 1; }

void scatter_add_values(at::Tensor& dense, const at::Tensor& positions, const at::Tensor& values) {
  EXOGYM_CHECK_INTERNAL(dense.scalar_type() == at::kFloat && dense.is_contiguous() && dense.device().is_cpu(),
                        "compressed values add into a contiguous fp32 CPU tensor");
  EXOGYM_CHECK_INTERNAL(positions.numel() == values.numel(), "as many positions as values");
  const at::Tensor at_ = positions.to(at::kLong).contiguous();
  const at::Tensor v_ = values.to(at::kFloat).contiguous();
  const int64_t* at = at_.data_ptr<int64_t>();
  const float* v = v_.data_ptr<float>();
  float* out = dense.data_ptr<float>();
  // Positions within one payload are distinct: the order of these adds
  // does not matter, only the order of the payloads does.
  for (int64_t j = 0; j < at_.numel(); ++j) out[at[j]] += v[j];
}

std::string describe_sparse(const char* what, double density, int64_t chunk,
                            const std::optional<sdk::QuantFormat>& quant) {
  std::ostringstream out;
  out << what << " " << density * 100 << "% of chunks of " << chunk << ", "
      << (quant ? sdk::to_string(*quant) : "fp32");
  return out.str();
}

}  // namespace exogym::modules::detail
