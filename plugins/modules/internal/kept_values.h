#pragma once
// The values a sparse compressor keeps (top-k, random-k), as they travel:
// fp32, or a low-bit format (sdk/quantize.h) whose blocks are the chunks'
// kept values, k per full chunk, so each chunk has one fp32 scale. Internal
// to the modules library (not installed).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exogym/sdk/quantize.h"

namespace exogym::modules::detail {

// The wire tensors of `values` (fp32, 1-D, k per full chunk): {values}, or
// {codes, scales}.
std::vector<at::Tensor> encode_kept(const at::Tensor& values, const std::optional<sdk::QuantFormat>& quant,
                                    int64_t per_chunk);
// The inverse, fp32: `count` values from wire[first] (and wire[first + 1]
// when quantised, `chunks` scales). Throws sdk::Error when the sizes do not
// fit (a payload received from elsewhere).
at::Tensor decode_kept(const std::vector<at::Tensor>& wire, size_t first, int64_t count, int64_t chunks,
                       const std::optional<sdk::QuantFormat>& quant, int64_t per_chunk);
// What encode_kept sends of `count` values in `chunks` chunks.
int64_t kept_bytes(int64_t count, int64_t chunks, const std::optional<sdk::QuantFormat>& quant);
// The number of wire tensors encode_kept makes: 1 or 2.
size_t kept_wire_count(const std::optional<sdk::QuantFormat>& quant);

// Adds values[j] at positions[j] into dense (fp32, contiguous, CPU).
void scatter_add_values(at::Tensor& dense, const at::Tensor& positions, const at::Tensor& values);

// "3% of chunks of 4096, int2": how sparse settings read in descriptions.
std::string describe_sparse(const char* what, double density, int64_t chunk,
                            const std::optional<sdk::QuantFormat>& quant);

}  // namespace exogym::modules::detail
