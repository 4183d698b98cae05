#pragma once
// The sparse average: the mean over the nodes of tensors that each node
// sends as its chunk-wise top-k (chunk_topk.h), the kept values in fp32 or
// quantised (sdk/quantize.h). SparseLoCo's collective (sparseloco.h)
// (docs/compression.md#the-sparse-average).
//
// What a node sends of a tensor of N values, in C = ceil(N / chunk) chunks
// keeping m = topk_count(N, chunk, density) values:
//   offsets  m * chunk_index_bytes(chunk) bytes (1, 2 or 4 each);
//   values   fp32: 4m bytes; or a low-bit format: packed_bytes(format, m)
//            bytes of codes and one fp32 scale per chunk, 4C bytes. The
//            quantisation block is one chunk's kept values: k values (the
//            last chunk's at most k), so a chunk's largest kept magnitude
//            sets its scale.
// sparse_bytes(N, format) is that sum; SparsePayload::bytes() what a payload
// holds, the same number.
//
// Averaging: every node all-gathers every tensor's (offsets, values[,
// scales]) in one all_gather; each node then decodes rank r's payload and
// adds its values at their positions into a zero fp32 tensor, for r = 0,
// 1, ..., R-1 in that order, and divides by R, the number of ranks the
// all_gather brought: the same bits on every node, whatever the scheduling.
// The ring all_gather sends (R-1) * S bytes per node, S = Σ sparse_bytes of
// the node's tensors (docs/simulation.md). Chunk, density and format are
// not sent: every node calls with the same ones, as with any collective.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/quantize.h"

namespace exogym::modules {

struct SparseFormat {
  int64_t chunk = 4096;
  double density = 1.0;                   // in (0, 1]
  std::optional<sdk::QuantFormat> quant;  // none: the values travel as fp32
};

// One tensor as one node sends it.
struct SparsePayload {
  at::Tensor offsets;  // chunk_index_dtype(chunk), m of them
  at::Tensor values;   // fp32 values, or the packed uint8 codes of a low-bit format
  at::Tensor scales;   // fp32, one per chunk; undefined without quantisation

  // The tensors an all_gather carries: offsets, values and (quantised) scales.
  std::vector<at::Tensor> wire() const;
  int64_t bytes() const;
};

// The closed form above, for a tensor of `numel` values.
int64_t sparse_bytes(int64_t numel, const SparseFormat& format);

// The top-k of `tensor` (chunk_topk), its values quantised when the format
// says so. Throws sdk::Error for a chunk or density chunk_topk refuses.
SparsePayload sparsify(const at::Tensor& tensor, const SparseFormat& format);

// Adds the values `payload` stands for (dequantised) into `dense`, a flat
// fp32 CPU tensor of the sparsified tensor's numel values, at their
// positions. Throws sdk::Error when the payload's sizes do not fit `dense`
// (a payload received from elsewhere).
void add_sparse(at::Tensor& dense, const SparsePayload& payload, const SparseFormat& format);
// Those values alone: zero off the kept positions, flat fp32 on the CPU.
at::Tensor densify(const SparsePayload& payload, int64_t numel, const SparseFormat& format);

// The average above: result[i] is the rank-ordered mean of every rank's
// payloads[i], fp32 on the CPU, shaped as shapes[i]. Called by every node
// with payloads of tensors of the same shapes; throws what comm.h's
// collectives throw.
std::vector<at::Tensor> sparse_mean(sdk::Communicator& comm, const std::vector<SparsePayload>& payloads,
                                    const std::vector<std::vector<int64_t>>& shapes, const SparseFormat& format);

}  // namespace exogym::modules
