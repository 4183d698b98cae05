#pragma once
// Averaging low-bit payloads (quantize.h) across nodes, on comm.h's
// non-blocking collectives (pending.h)
// (docs/compression.md#averaging-quantised-tensors). A strategy does not
// call it: it sends a low-bit format through the compression library's one
// average (exogym/modules/compression/compressor.h's compressed_mean with a
// QuantizeCompressor, error feedback around it), which comes here.
//
// A sum of quantised values is not a quantised value, so the payloads are
// not summed on the wire. Two ways, as QuantCollective says:
//
//   ReduceScatter (the default; torchft's quantized all-reduce): every node
//   quantises each tensor and cuts it into one chunk per node, in whole
//   blocks; chunk p of every node goes to node p (all_to_all_async), which
//   dequantises the K chunks, sums them in fp32 in rank order (0, 1, ...,
//   K-1), divides by K and quantises that mean once more; an all_gather
//   brings every node every node's mean chunk. Per node about
//   2 (K-1)/K * S bytes, S = quantized_bytes of the tensors: a ring
//   all-reduce's bytes in low bits, at any K. The mean is rounded twice
//   (each node's values, then the mean chunk).
//   Gather: every node's whole payload goes to every node (all_gather),
//   which dequantises them all and sums them in rank order: (K-1) * S bytes
//   per node, the mean of exactly what was sent, rounded once.
//
// Either way every node gets the same bits, whatever the thread scheduling.
// docs/compression.md gives the bytes exactly, chunk by chunk. Shapes,
// dtypes, format and block size are not sent: as with every collective,
// every node calls with the same ones (a node whose sizes differ makes
// dequantising throw sdk::Error). Like any collective, called from the
// node's own thread; it throws what comm.h's collectives throw.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/pending.h"
#include "exogym/sdk/quantize.h"

namespace exogym::sdk {

enum class QuantCollective { ReduceScatter, Gather };

// "reduce_scatter", "gather", as options spell them; from_name throws
// ConfigError at `json_path` for any other name.
const char* to_string(QuantCollective collective);
QuantCollective quant_collective_from_name(const std::string& name, const std::string& json_path);

// The mean over nodes of `payloads` (one per tensor, every one in one
// format and block size), started at once and completed by wait(), which
// returns one mean per payload, with the payload's dtype and device,
// averaged by `collective`. The transfers overlap what the node computes
// until wait() (pending.h); the handle saves and loads itself
// (Pending::save, Pending::load).
Pending quantized_mean_async(Communicator& comm, const std::vector<QuantizedPayload>& payloads,
                             QuantCollective collective = QuantCollective::ReduceScatter);

// The rank-ordered fp32 mean of the payloads' values, as by_rank[0]'s dtype
// and device: (v_0 + v_1 + ... + v_{K-1}) / K.
at::Tensor mean_of_payloads(const std::vector<QuantizedPayload>& by_rank);

// Where the reduce-scatter cuts a tensor of `numel` values for `nodes`
// nodes: chunk p is [p * c, (p + 1) * c) clipped to numel, c the smallest
// multiple of the block size (and of a byte's worth of codes) at least
// numel / nodes; the last chunks may be short or empty.
int64_t quant_chunk_length(int64_t numel, int nodes, QuantFormat format, int64_t block_size);

}  // namespace exogym::sdk
