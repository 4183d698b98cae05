#pragma once
// Averaging low-bit payloads (quantize.h) across nodes, on comm.h's
// collectives, blocking or not (pending.h)
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

// A quantized_mean started by quantized_mean_async and not yet waited for:
// the all_gather's handle (pending.h, whose rules hold) and what every node
// knows of the payloads without sending it. Movable, not copyable.
class PendingQuantizedMean {
 public:
  PendingQuantizedMean() = default;  // holds nothing: valid() is false

  bool valid() const { return gathered_.valid(); }
  // What quantized_mean would have returned, bit for bit; the node's clock
  // moves as Pending::wait's does. sdk::Error when it holds nothing.
  std::vector<at::Tensor> wait();

  // Checkpoints: the gathered payloads and the runtime's record under keys
  // that start with `prefix` (Pending::save). load() needs what the payloads'
  // metadata came from: the tensors the mean was started with (or any of
  // their shapes, dtypes and devices), the format and the block size.
  void save(StateDict& out, const std::string& prefix) const;
  static PendingQuantizedMean load(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   const std::vector<at::Tensor>& like, QuantFormat format,
                                   int64_t block_size = kDefaultQuantBlock);

 private:
  friend PendingQuantizedMean quantized_mean_async(Communicator&, const std::vector<at::Tensor>&, QuantFormat, int64_t,
                                                   ErrorFeedback*);
  PendingGather gathered_;
  std::vector<QuantizedPayload> layout_;  // the metadata only: codes and scales are in gathered_
};

// quantized_mean, started at once (quantised, through `feedback`, now) and
// completed by wait(): the all_gather overlaps what the node computes in
// between (pending.h). The same bytes and the same result as quantized_mean.
PendingQuantizedMean quantized_mean_async(Communicator& comm, const std::vector<at::Tensor>& tensors,
                                          QuantFormat format, int64_t block_size = kDefaultQuantBlock,
                                          ErrorFeedback* feedback = nullptr);

}  // namespace exogym::sdk
