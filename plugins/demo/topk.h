#pragma once
// DeMo's top-k selection on the CPU (dct.h's extract_topk, compress and
// the fused DctTransform::accumulate_and_extract): the k largest
// magnitudes of each chunk, of equal ones the lower positions, taken out
// of the chunk: chunk-wise top-k's selection (exogym/modules/compression/
// chunk_topk.h's select_topk), with the values moved out.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "demo/dct.h"
#include "exogym/modules/compression/chunk_topk.h"

namespace exogym::modules::demo::detail {

// The coefficients each chunk sends, taken out chunk by chunk: `chunks`
// is the encoding's shape without its last (per-chunk) axis; k is topk
// clamped to [1, length].
class TopkSelection {
 public:
  TopkSelection(std::vector<int64_t> chunks, int64_t length, int64_t topk, const at::TensorOptions& options);
  int64_t k() const { return k_; }
  // Chunk c, at `row` (length floats, on the CPU).
  void take(int64_t c, float* row);
  Compressed result() const { return {idx_, val_}; }

 private:
  int64_t length_, k_;
  at::Tensor idx_, val_;
  TopkScratch scratch_;
};

}  // namespace exogym::modules::demo::detail
