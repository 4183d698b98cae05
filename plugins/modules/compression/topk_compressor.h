#pragma once
// Chunk-wise top-k as a compressor (compressor.h): each chunk's largest
// magnitudes (chunk_topk.h), their offsets coded, their values in fp32 or a
// low-bit format (sdk/quantize.h). SparseLoCo's compressor (sparseloco.h)
// (docs/compression.md#chunk-wise-top-k).
//
// What a node sends of a tensor of N values, in C = ceil(N / chunk) chunks
// keeping m = topk_count(N, chunk, density) values:
//   offsets  Elias-Fano: elias_fano_bytes(N, chunk, density) bytes
//            (elias_fano.h, about 7 bits each at 3 %); or fixed: m *
//            chunk_index_bytes(chunk) bytes (1, 2 or 4 each)
//   values   fp32: 4m bytes; or a low-bit format: packed_bytes(format, m)
//            bytes of codes and one fp32 scale per chunk, 4C bytes. The
//            quantisation block is one chunk's kept values: k values (the
//            last chunk's at most k), so a chunk's largest kept magnitude
//            sets its scale.
// bytes(N) is that sum. The wire holds (offsets, values[, scales]).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "exogym/modules/compression/compressor.h"
#include "exogym/sdk/quantize.h"

namespace exogym::modules {

enum class OffsetCoding {
  EliasFano,  // elias_fano.h
  Fixed,      // the narrowest integer type that holds chunk - 1
};
// "elias_fano", "fixed", as options spell them; from_name throws
// sdk::ConfigError at `json_path` for another name.
const char* to_string(OffsetCoding coding);
OffsetCoding offset_coding_from_name(const std::string& name, const std::string& json_path);

struct SparseFormat {
  int64_t chunk = 4096;
  double density = 1.0;                   // in (0, 1]
  std::optional<sdk::QuantFormat> quant;  // none: the values travel as fp32
  OffsetCoding offsets = OffsetCoding::EliasFano;
};

class ChunkTopKCompressor final : public Compressor {
 public:
  // Throws sdk::Error for a chunk outside 1 .. 2^31 or a density outside (0, 1].
  explicit ChunkTopKCompressor(SparseFormat format);

  CompressedTensor compress(const at::Tensor& tensor, uint64_t shared_seed = 0) const override;
  void add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t shared_seed = 0) const override;
  int64_t bytes(int64_t numel) const override;
  std::string describe() const override;

  const SparseFormat& format() const { return format_; }

 private:
  SparseFormat format_;
};

}  // namespace exogym::modules
