#include "exogym/modules/sparse_average.h"

#include <ATen/ATen.h>

#include <string>

#include "exogym/modules/chunk_topk.h"
#include "exogym/sdk/error.h"

namespace exogym::modules {

namespace {

int64_t chunk_count(int64_t numel, int64_t chunk) { return (numel + chunk - 1) / chunk; }

// The kept values of `payload` as fp32: the values themselves, or the
// codes dequantised in blocks of one chunk's kept values.
at::Tensor kept_values(const SparsePayload& payload, const SparseFormat& format) {
  if (!format.quant) return payload.values.to(at::kCPU, at::kFloat);
  sdk::QuantizedPayload q;
  q.format = *format.quant;
  q.block_size = topk_per_chunk(format.chunk, format.density);
  q.shape = {payload.offsets.numel()};
  q.codes = payload.values;
  q.scales = payload.scales;
  return sdk::dequantize_float(q);
}

}  // namespace

std::vector<at::Tensor> SparsePayload::wire() const {
  if (scales.defined()) return {offsets, values, scales};
  return {offsets, values};
}

int64_t SparsePayload::bytes() const {
  int64_t total = 0;
  for (const auto& t : wire()) total += t.numel() * static_cast<int64_t>(t.element_size());
  return total;
}

int64_t sparse_bytes(int64_t numel, const SparseFormat& format) {
  const int64_t m = topk_count(numel, format.chunk, format.density);
  const int64_t offsets = m * chunk_index_bytes(format.chunk);
  if (!format.quant) return offsets + 4 * m;
  return offsets + sdk::packed_bytes(*format.quant, m) + 4 * chunk_count(numel, format.chunk);
}

SparsePayload sparsify(const at::Tensor& tensor, const SparseFormat& format) {
  ChunkTopK top = chunk_topk(tensor, format.chunk, format.density);
  SparsePayload payload;
  payload.offsets = top.indices;
  if (!format.quant) {
    payload.values = top.values;
    return payload;
  }
  sdk::QuantizedPayload q = sdk::quantize(top.values, *format.quant, topk_per_chunk(format.chunk, format.density));
  payload.values = q.codes;
  payload.scales = q.scales;
  return payload;
}

void add_sparse(at::Tensor& dense, const SparsePayload& payload, const SparseFormat& format) {
  EXOGYM_CHECK_INTERNAL(dense.scalar_type() == at::kFloat && dense.is_contiguous() && dense.device().is_cpu(),
                        "add_sparse adds into a contiguous fp32 CPU tensor");
  const int64_t numel = dense.numel();
  const at::Tensor positions = chunk_positions(payload.offsets, numel, format.chunk, format.density);
  if (format.quant && (!payload.scales.defined() || payload.scales.numel() != chunk_count(numel, format.chunk))) {
    throw sdk::Error("sparse payload: expected " + std::to_string(chunk_count(numel, format.chunk)) +
                     " scales, one per chunk");
  }
  const at::Tensor values = kept_values(payload, format).contiguous();
  if (values.numel() != positions.numel()) {
    throw sdk::Error("sparse payload: " + std::to_string(values.numel()) + " values for " +
                     std::to_string(positions.numel()) + " positions");
  }
  const int64_t* at = positions.data_ptr<int64_t>();
  const float* v = values.data_ptr<float>();
  float* out = dense.data_ptr<float>();
  // Positions within one payload are distinct: the order of these adds
  // does not matter, only the order of the payloads does.
  for (int64_t j = 0; j < positions.numel(); ++j) out[at[j]] += v[j];
}

at::Tensor densify(const SparsePayload& payload, int64_t numel, const SparseFormat& format) {
  at::Tensor dense = at::zeros({numel}, at::kFloat);
  add_sparse(dense, payload, format);
  return dense;
}

std::vector<at::Tensor> sparse_mean(sdk::Communicator& comm, const std::vector<SparsePayload>& payloads,
                                    const std::vector<std::vector<int64_t>>& shapes, const SparseFormat& format) {
  EXOGYM_CHECK_INTERNAL(payloads.size() == shapes.size(), "sparse_mean needs one shape per payload");
  const size_t per_payload = format.quant ? 3 : 2;
  std::vector<at::Tensor> wire;
  for (const auto& p : payloads) {
    for (auto& t : p.wire()) wire.push_back(t);
  }
  const auto gathered = comm.all_gather(wire);
  std::vector<at::Tensor> means;
  for (size_t i = 0; i < payloads.size(); ++i) {
    int64_t numel = 1;
    for (int64_t d : shapes[i]) numel *= d;
    at::Tensor sum = at::zeros({numel}, at::kFloat);
    for (const auto& by_rank : gathered) {
      EXOGYM_CHECK_INTERNAL(by_rank.size() == wire.size(), "all_gather returned another tensor count");
      SparsePayload p;
      p.offsets = by_rank[per_payload * i];
      p.values = by_rank[per_payload * i + 1];
      if (format.quant) p.scales = by_rank[per_payload * i + 2];
      add_sparse(sum, p, format);
    }
    // As all_reduce's Avg and sdk::mean_of_payloads: the sum, then / R.
    sum.div_(static_cast<double>(gathered.size()));
    means.push_back(sum.reshape(shapes[i]));
  }
  return means;
}

}  // namespace exogym::modules
