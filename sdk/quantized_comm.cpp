#include "exogym/sdk/quantized_comm.h"

#include "exogym/sdk/error.h"

namespace exogym::sdk {

std::vector<std::vector<QuantizedPayload>> all_gather_payloads(Communicator& comm,
                                                               const std::vector<QuantizedPayload>& payloads) {
  std::vector<at::Tensor> wire;
  wire.reserve(2 * payloads.size());
  for (const auto& p : payloads) {
    wire.push_back(p.codes);
    wire.push_back(p.scales);
  }
  const auto gathered = comm.all_gather(wire);
  std::vector<std::vector<QuantizedPayload>> by_rank(gathered.size(), payloads);
  for (size_t r = 0; r < gathered.size(); ++r) {
    EXOGYM_CHECK_INTERNAL(gathered[r].size() == wire.size(), "all_gather returned another tensor count");
    for (size_t i = 0; i < payloads.size(); ++i) {
      by_rank[r][i].codes = gathered[r][2 * i];
      by_rank[r][i].scales = gathered[r][2 * i + 1];
    }
  }
  return by_rank;
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
  std::vector<QuantizedPayload> payloads;
  payloads.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    payloads.push_back(feedback ? feedback->quantize(i, tensors[i], format, block_size)
                                : quantize(tensors[i], format, block_size));
  }
  const auto by_rank = all_gather_payloads(comm, payloads);
  std::vector<at::Tensor> means;
  means.reserve(tensors.size());
  std::vector<QuantizedPayload> column(by_rank.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (size_t r = 0; r < by_rank.size(); ++r) column[r] = by_rank[r][i];
    means.push_back(mean_of_payloads(column));
  }
  return means;
}

at::Tensor quantized_mean(Communicator& comm, const at::Tensor& tensor, QuantFormat format, int64_t block_size,
                          ErrorFeedback* feedback) {
  return quantized_mean(comm, std::vector<at::Tensor>{tensor}, format, block_size, feedback).at(0);
}

}  // namespace exogym::sdk
