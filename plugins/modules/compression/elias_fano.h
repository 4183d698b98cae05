#pragma once
// Elias–Fano coding of the offsets chunk-wise top-k keeps (chunk_topk.h):
// close to the fewest bits that can name k of L positions, at a size that
// depends on L and k alone, so a payload's bytes stay a closed form
// (docs/compression.md#offsets). At 123 of 4096 (3 %) it takes 866 bits, 7.0
// per offset, where the narrowest integer type takes 16.
//
// A chunk of L values keeping k ascending offsets o_0 < ... < o_{k-1} < L:
//   l     the largest integer with k * 2^l <= L (0 if there is none)
//   low   o_j mod 2^l for j = 0 .. k-1, l bits each
//   high  a bit vector of k + ((L-1) >> l) + 1 bits, bit (o_j >> l) + j set
//   bits  elias_fano_bits(L, k) = k*l + k + ((L-1) >> l) + 1
// A tensor's code is its chunks' codes one after another (chunks as
// chunk_topk cuts them), each chunk's low bits then its high bits, written
// least significant bit first into uint8 bytes; the last byte is padded with
// zeros.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace exogym::modules {

// The bits of one chunk of `length` values keeping `kept` offsets (0 for an
// empty chunk).
int64_t elias_fano_bits(int64_t length, int64_t kept);
// The bytes of a tensor of `numel` values: ceil(Σ chunk bits / 8).
int64_t elias_fano_bytes(int64_t numel, int64_t chunk, double density);

// `offsets` as chunk_topk returns them for a tensor of `numel` values ->
// its code (uint8, 1-D, elias_fano_bytes long).
at::Tensor elias_fano_encode(const at::Tensor& offsets, int64_t numel, int64_t chunk, double density);

// The inverse: the offsets in chunk_topk's order (int32, within their
// chunks). Throws sdk::Error for a code of another size, or one that does
// not decode to ascending offsets inside their chunks (a payload received
// from elsewhere).
at::Tensor elias_fano_decode(const at::Tensor& code, int64_t numel, int64_t chunk, double density);

}  // namespace exogym::modules
