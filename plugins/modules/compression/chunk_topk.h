#pragma once
// Chunk-wise top-k: the k largest magnitudes of every chunk of a tensor, as
// (positions, values), the sparsifier of SparseLoCo (sparseloco.h) and of
// anything else that sends a few values per chunk (docs/compression.md#chunk-wise-top-k).
//
// The tensor is read flat, in row-major order, and cut into chunks of
// `chunk` consecutive values; the last chunk may be shorter (a tensor
// smaller than a chunk is one short chunk). A chunk of L values keeps
// k(L) = ceil(density * L) of them, at least 1: a full chunk keeps
// k = topk_per_chunk(chunk, density), a shorter last one at most as many.
// Of equal magnitudes the lower position wins; a NaN counts as the largest
// magnitude, so a non-finite value is sent rather than silently kept. The
// kept values come out chunk by chunk, in ascending positions within each
// chunk, so the result is a function of the values alone: the same bits on
// every machine, for any number of threads.
//
// A position is sent as its offset within its chunk, in the narrowest
// integer type that holds chunk - 1 (chunk_index_dtype): the chunk it
// belongs to follows from its place in the list, since every chunk's count
// is known from the tensor's size. CPU only; fp32 values.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace exogym::modules {

// ceil(density * length), clamped to [1, length] (0 for an empty chunk).
// density in (0, 1].
int64_t topk_per_chunk(int64_t length, double density);
// The values a tensor of `numel` values keeps: the sum over its chunks.
int64_t topk_count(int64_t numel, int64_t chunk, double density);
// ceil(numel / chunk): the chunks a tensor of `numel` values is cut into.
int64_t chunk_count(int64_t numel, int64_t chunk);
// Throws sdk::Error for a chunk outside 1 .. 2^31 or a density outside
// (0, 1]: the settings chunk_topk refuses, checked up front.
void check_chunk_settings(int64_t chunk, double density);
// uint8 for chunk <= 256, int16 up to 32768, int32 beyond; and its bytes.
c10::ScalarType chunk_index_dtype(int64_t chunk);
int64_t chunk_index_bytes(int64_t chunk);

struct ChunkTopK {
  at::Tensor indices;  // 1-D, chunk_index_dtype(chunk): offsets within their chunk
  at::Tensor values;   // 1-D, float32: the tensor's values at those positions
};

// The top-k of `tensor` (any floating dtype and device; read as fp32 on the
// CPU). Throws sdk::Error for a chunk below 1, a density outside (0, 1] or
// a chunk of more than 2^31 values.
ChunkTopK chunk_topk(const at::Tensor& tensor, int64_t chunk, double density);

// The selection of one chunk, which chunk_topk and DeMo's coefficient
// selection (plugins/demo/topk.h) share: the offsets of the k largest
// magnitudes of row[0..length), in ascending order, into offsets[0..k)
// (1 <= k <= length). The magnitudes are bounded block by block first, so
// that only the blocks that can hold one of the k are searched: a few
// vectorised passes over the chunk, compiled for the CPU's widest vectors.
struct TopkScratch {  // reused from chunk to chunk
  std::vector<uint32_t> keys, maxima, candidate_keys;
  std::vector<int64_t> passing, candidates, taken;
};
void select_topk(const float* row, int64_t length, int64_t k, int64_t* offsets, TopkScratch& scratch);

// The flat positions (int64, 0 .. numel-1) that `indices` of a tensor of
// `numel` values stand for, in the same order. Throws sdk::Error when the
// count is not topk_count(numel, chunk, density) or an offset lies outside
// its chunk (a payload received from elsewhere).
at::Tensor chunk_positions(const at::Tensor& indices, int64_t numel, int64_t chunk, double density);

}  // namespace exogym::modules
