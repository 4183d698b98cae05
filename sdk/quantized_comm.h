#pragma once
// Averaging low-bit payloads (quantize.h) across nodes, on the blocking
// collectives of comm.h (docs/compression.md#averaging-quantised-tensors).
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
#include "exogym/sdk/quantize.h"

namespace exogym::sdk {

// result[r][i] = rank r's payloads[i] (the metadata is this node's; the
// codes and scales are rank r's). One all_gather of every codes and scales
// tensor.
std::vector<std::vector<QuantizedPayload>> all_gather_payloads(Communicator& comm,
                                                               const std::vector<QuantizedPayload>& payloads);

// The rank-ordered fp32 mean of the payloads' values, as by_rank[0]'s dtype
// and device: (v_0 + v_1 + ... + v_{K-1}) / K.
at::Tensor mean_of_payloads(const std::vector<QuantizedPayload>& by_rank);

// The mean over nodes of `tensors` as sent in `format`: each tensor is
// quantised (through `feedback`, slot i for tensors[i], when given), the
// payloads all-gathered, and mean_of_payloads taken per tensor. The results
// have the tensors' dtypes and devices.
std::vector<at::Tensor> quantized_mean(Communicator& comm, const std::vector<at::Tensor>& tensors, QuantFormat format,
                                       int64_t block_size = kDefaultQuantBlock, ErrorFeedback* feedback = nullptr);
at::Tensor quantized_mean(Communicator& comm, const at::Tensor& tensor, QuantFormat format,
                          int64_t block_size = kDefaultQuantBlock, ErrorFeedback* feedback = nullptr);

}  // namespace exogym::sdk
