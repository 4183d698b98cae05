#include "exogym/sdk/quantized_comm.h"

#include "exogym/sdk/error.h"

namespace exogym::sdk {

namespace {

// What the wire carries of `payloads`: each one's codes, then its scales.
std::vector<at::Tensor> wire_of(const std::vector<QuantizedPayload>& payloads) {
  std::vector<at::Tensor> wire;
  wire.reserve(2 * payloads.size());
  for (const auto& p : payloads) {
    wire.push_back(p.codes);
    wire.push_back(p.scales);
  }
  return wire;
}

// The payloads an all_gather of wire_of(layout) brought, by rank: layout's
// metadata with each rank's codes and scales.
std::vector<std::vector<QuantizedPayload>> payloads_by_rank(const std::vector<std::vector<at::Tensor>>& gathered,
                                                            const std::vector<QuantizedPayload>& layout) {
  std::vector<std::vector<QuantizedPayload>> by_rank(gathered.size(), layout);
  for (size_t r = 0; r < gathered.size(); ++r) {
    EXOGYM_CHECK_INTERNAL(gathered[r].size() == 2 * layout.size(), "all_gather returned another tensor count");
    for (size_t i = 0; i < layout.size(); ++i) {
      by_rank[r][i].codes = gathered[r][2 * i];
      by_rank[r][i].scales = gathered[r][2 * i + 1];
    }
  }
  return by_rank;
}

// Per tensor, the rank-ordered mean of every rank's payload.
std::vector<at::Tensor> means_of(const std::vector<std::vector<QuantizedPayload>>& by_rank, size_t tensors) {
  std::vector<at::Tensor> means;
  means.reserve(tensors);
  std::vector<QuantizedPayload> column(by_rank.size());
  for (size_t i = 0; i < tensors; ++i) {
    for (size_t r = 0; r < by_rank.size(); ++r) column[r] = by_rank[r][i];
    means.push_back(mean_of_payloads(column));
  }
  return means;
}

std::vector<QuantizedPayload> quantize_all(const std::vector<at::Tensor>& tensors, QuantFormat format,
                                           int64_t block_size, ErrorFeedback* feedback) {
  std::vector<QuantizedPayload> payloads;
  payloads.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    payloads.push_back(feedback ? feedback->quantize(i, tensors[i], format, block_size)
                                : quantize(tensors[i], format, block_size));
  }
  return payloads;
}

}  // namespace

std::vector<std::vector<QuantizedPayload>> all_gather_payloads(Communicator& comm,
                                                               const std::vector<QuantizedPayload>& payloads) {
  return payloads_by_rank(comm.all_gather(wire_of(payloads)), payloads);
}

at::Tensor mean_of_payloads(const std::vector<QuantizedPayload>& by_rank) {
  EXOGYM_CHECK_INTERNAL(!by_rank.empty(), "mean_of_payloads needs at least one payload");
  at::Tensor sum = dequantize_float(by_rank[0]);
  for (size_t r = 1; r < by_rank.size(); ++r) sum.add_(dequantize_float(by_rank[r]));
  sum.div_(static_cast<double>(by_rank.size()));
  return sum.to(by_rank[0].device, by_rank[0].dtype);
}

std::vector<at::Tensor> quantized_mean(Communicator& comm, const std::vector<at::Tensor>& tensors, QuantFormat format,
                                       int64_t block_size, ErrorFeedback* feedback) {
  return means_of(all_gather_payloads(comm, quantize_all(tensors, format, block_size, feedback)), tensors.size());
}

at::Tensor quantized_mean(Communicator& comm, const at::Tensor& tensor, QuantFormat format, int64_t block_size,
                          ErrorFeedback* feedback) {
  return quantized_mean(comm, std::vector<at::Tensor>{tensor}, format, block_size, feedback).at(0);
}

std::vector<at::Tensor> PendingQuantizedMean::wait() {
  auto gathered = gathered_.wait();
  return means_of(payloads_by_rank(gathered, layout_), layout_.size());
}

void PendingQuantizedMean::save(StateDict& out, const std::string& prefix) const { gathered_.save(out, prefix); }

PendingQuantizedMean PendingQuantizedMean::load(const StateDict& in, const std::string& prefix, Communicator& comm,
                                                const std::vector<at::Tensor>& like, QuantFormat format,
                                                int64_t block_size) {
  PendingQuantizedMean pending;
  pending.gathered_ = PendingGather::load(in, prefix, comm);
  if (!pending.valid()) return pending;
  for (const auto& t : like) {
    QuantizedPayload meta;
    meta.format = format;
    meta.block_size = block_size;
    meta.shape = t.sizes().vec();
    meta.dtype = t.scalar_type();
    meta.device = t.device();
    pending.layout_.push_back(std::move(meta));
  }
  return pending;
}

PendingQuantizedMean quantized_mean_async(Communicator& comm, const std::vector<at::Tensor>& tensors,
                                          QuantFormat format, int64_t block_size, ErrorFeedback* feedback) {
  PendingQuantizedMean pending;
  pending.layout_ = quantize_all(tensors, format, block_size, feedback);
  pending.gathered_ = comm.all_gather_async(wire_of(pending.layout_));
  // Only the metadata stays: the payloads travel in the handle.
  for (auto& payload : pending.layout_) payload.codes = payload.scales = at::Tensor();
  return pending;
}

}  // namespace exogym::sdk
