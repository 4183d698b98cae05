#pragma once
// Averaging low-bit payloads (quantize.h) across nodes, on comm.h's
// non-blocking all_gather (pending.h)
// (docs/compression.md#averaging-quantised-tensors).
//
// A sum of quantised values is not a quantised value, so the payloads are
// not reduced on the wire: every node quantises its tensors, all-gathers
// the payloads (codes and scales, nothing else), dequantises every node's
// payload to fp32 and sums them in rank order (0, 1, ..., K-1), then
// divides by K, as all_reduce's Avg does. Every node gets the same bits,
// whatever the thread scheduling.
//
// Bytes: one all_gather of S = Σ quantized_bytes(format, numel, block) per
// node, which the ring all_gather sends as (K-1) * S per node (the
// runtime's accounting, docs/simulation.md). Shapes, dtypes, format and
// block size are not sent: as with every collective, every node calls with
// the same ones (a node whose sizes differ makes dequantising throw
// sdk::Error). Like any collective, called from the node's own thread; it
// throws what comm.h's collectives throw.
#include <ATen/core/Tensor.h>

#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error_feedback.h"
#include "exogym/sdk/pending.h"
#include "exogym/sdk/quantize.h"

namespace exogym::sdk {

// The mean over nodes of `tensors` as sent in `format`, started at once and
// completed by wait(), which returns one mean per tensor, with the tensors'
// dtypes and devices: each tensor is quantised now (through `feedback`,
// slot i for tensors[i], when given), the payloads all-gathered, and the
// rank-ordered mean of every node's payload taken per tensor
// (mean_of_payloads). The all_gather overlaps what the node computes until
// wait() (pending.h); quantized_mean_async(...).wait() is the blocking
// form. The handle saves and loads itself (Pending::save, Pending::load).
Pending quantized_mean_async(Communicator& comm, const std::vector<at::Tensor>& tensors, QuantFormat format,
                             int64_t block_size = kDefaultQuantBlock, ErrorFeedback* feedback = nullptr);

// The rank-ordered fp32 mean of the payloads' values, as by_rank[0]'s dtype
// and device: (v_0 + v_1 + ... + v_{K-1}) / K.
at::Tensor mean_of_payloads(const std::vector<QuantizedPayload>& by_rank);

}  // namespace exogym::sdk
