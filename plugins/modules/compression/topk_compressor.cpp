#include "exogym/modules/compression/topk_compressor.h"

#include <ATen/ATen.h>

#include <string>

#include "exogym/modules/compression/chunk_topk.h"
#include "exogym/modules/compression/elias_fano.h"
#include "exogym/modules/internal/kept_values.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/options.h"

namespace exogym::modules {

const char* to_string(OffsetCoding coding) { return coding == OffsetCoding::EliasFano ? "elias_fano" : "fixed"; }

OffsetCoding offset_coding_from_name(const std::string& name, const std::string& json_path) {
  if (name == "elias_fano") return OffsetCoding::EliasFano;
  if (name == "fixed") return OffsetCoding::Fixed;
  throw sdk::ConfigError(json_path, "unknown offset coding \"" + name + "\": expected elias_fano or fixed");
}

ChunkTopKCompressor::ChunkTopKCompressor(SparseFormat format) : format_(format) {
  // Made now rather than at the first round.
  check_chunk_settings(format_.chunk, format_.density);
}

CompressedTensor ChunkTopKCompressor::compress(const at::Tensor& tensor, uint64_t /*shared_seed*/) const {
  ChunkTopK top = chunk_topk(tensor, format_.chunk, format_.density);
  CompressedTensor payload;
  payload.wire.push_back(format_.offsets == OffsetCoding::EliasFano
                             ? elias_fano_encode(top.indices, tensor.numel(), format_.chunk, format_.density)
                             : top.indices);
  for (auto& t : detail::encode_kept(top.values, format_.quant, topk_per_chunk(format_.chunk, format_.density))) {
    payload.wire.push_back(t);
  }
  return payload;
}

void ChunkTopKCompressor::add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t /*shared_seed*/) const {
  const int64_t numel = dense.numel(), chunk = format_.chunk;
  if (payload.wire.empty()) throw sdk::Error("top-k payload: no tensors");
  const at::Tensor offsets = format_.offsets == OffsetCoding::EliasFano
                                 ? elias_fano_decode(payload.wire[0], numel, chunk, format_.density)
                                 : payload.wire[0];
  const at::Tensor positions = chunk_positions(offsets, numel, chunk, format_.density);
  const at::Tensor values = detail::decode_kept(payload.wire, 1, positions.numel(), chunk_count(numel, chunk),
                                                format_.quant, topk_per_chunk(chunk, format_.density));
  detail::scatter_add_values(dense, positions, values);
}

int64_t ChunkTopKCompressor::bytes(int64_t numel) const {
  const int64_t m = topk_count(numel, format_.chunk, format_.density);
  const int64_t offsets = format_.offsets == OffsetCoding::EliasFano
                              ? elias_fano_bytes(numel, format_.chunk, format_.density)
                              : m * chunk_index_bytes(format_.chunk);
  return offsets + detail::kept_bytes(m, chunk_count(numel, format_.chunk), format_.quant);
}

std::string ChunkTopKCompressor::describe() const {
  return detail::describe_sparse("top-k", format_.density, format_.chunk, format_.quant) + ", " +
         to_string(format_.offsets) + " offsets";
}

}  // namespace exogym::modules
