#include "exogym/modules/compression/compressor.h"

#include <ATen/ATen.h>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::modules {

namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A summable payload's values, one fp32 tensor per input, to be averaged
// with an all_reduce (copies: the blocking all_reduce averages in place).
std::vector<at::Tensor> summable_values(const std::vector<CompressedInput>& inputs) {
  std::vector<at::Tensor> values;
  for (const auto& in : inputs) {
    EXOGYM_CHECK_INTERNAL(in.payload.wire.size() == 1, "a summable payload is one tensor");
    values.push_back(in.payload.wire[0].clone());
  }
  return values;
}

// The averaged values of summable payloads, placed at their positions.
std::vector<at::Tensor> placed_means(const Compressor& compressor, const std::vector<CompressedInput>& inputs,
                                     const std::vector<at::Tensor>& averaged) {
  EXOGYM_CHECK_INTERNAL(averaged.size() == inputs.size(), "an all_reduce returned another tensor count");
  std::vector<at::Tensor> means;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor mean = at::zeros({numel_of(inputs[i].shape)}, at::kFloat);
    compressor.add_to(mean, CompressedTensor{{averaged[i]}}, inputs[i].shared_seed);
    means.push_back(mean.reshape(inputs[i].shape));
  }
  return means;
}

// The payloads of a compressor that sends every value in one low-bit
// format, as the SDK's low-bit collective takes them.
std::vector<sdk::QuantizedPayload> dense_payloads(const Compressor::DenseQuantization& dense,
                                                  const std::vector<CompressedInput>& inputs) {
  std::vector<sdk::QuantizedPayload> payloads;
  for (const auto& in : inputs) {
    if (in.payload.wire.size() != 2) throw sdk::Error("quantized payload: expected codes and scales");
    sdk::QuantizedPayload p;
    p.format = dense.format;
    p.block_size = dense.block;
    p.shape = in.shape;
    p.codes = in.payload.wire[0];
    p.scales = in.payload.wire[1];
    payloads.push_back(std::move(p));
  }
  return payloads;
}

// Every input's wire tensors, one input after another, and where each
// input's start.
struct Wire {
  std::vector<at::Tensor> tensors;
  std::vector<size_t> first;
};
Wire wire_of(const std::vector<CompressedInput>& inputs) {
  Wire wire;
  for (const auto& in : inputs) {
    wire.first.push_back(wire.tensors.size());
    for (const auto& t : in.payload.wire) wire.tensors.push_back(t);
  }
  return wire;
}

// The means of gathered payloads: `gathered` holds every rank's wire
// tensors, rank 0's first. Each node adds rank r's payload into a zero
// fp32 tensor for r = 0, 1, ..., R-1 in that order, then divides by R, as
// all_reduce's Avg and sdk::mean_of_payloads do.
std::vector<at::Tensor> gathered_means(const Compressor& compressor, const std::vector<CompressedInput>& inputs,
                                       const Wire& wire, const std::vector<at::Tensor>& gathered) {
  if (inputs.empty()) return {};
  // The counts were checked by the all_gather: every rank sends as many.
  EXOGYM_CHECK_INTERNAL(!wire.tensors.empty() && gathered.size() % wire.tensors.size() == 0,
                        "all_gather returned another tensor count");
  const size_t ranks = gathered.size() / wire.tensors.size();
  std::vector<at::Tensor> means;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor sum = at::zeros({numel_of(inputs[i].shape)}, at::kFloat);
    const size_t count = inputs[i].payload.wire.size();
    for (size_t r = 0; r < ranks; ++r) {
      const auto first = gathered.begin() + static_cast<std::ptrdiff_t>(r * wire.tensors.size() + wire.first[i]);
      CompressedTensor payload;
      payload.wire.assign(first, first + static_cast<std::ptrdiff_t>(count));
      compressor.add_to(sum, payload, inputs[i].shared_seed);
    }
    sum.div_(static_cast<double>(ranks));
    means.push_back(sum.reshape(inputs[i].shape));
  }
  return means;
}

// A handle whose result is `means`, complete once the transfer it follows
// (Pending::and_then) is.
sdk::Pending holding(std::vector<at::Tensor> means) { return {sdk::completed(), std::move(means)}; }

}  // namespace

int64_t CompressedTensor::bytes() const {
  int64_t total = 0;
  for (const auto& t : wire) total += t.numel() * static_cast<int64_t>(t.element_size());
  return total;
}

at::Tensor Compressor::decompress(const CompressedTensor& payload, int64_t numel, uint64_t shared_seed) const {
  at::Tensor dense = at::zeros({numel}, at::kFloat);
  add_to(dense, payload, shared_seed);
  return dense;
}

std::vector<at::Tensor> compressed_mean(sdk::Communicator& comm, const Compressor& compressor,
                                        const std::vector<CompressedInput>& inputs, sdk::QuantCollective collective) {
  if (compressor.summable()) {
    std::vector<at::Tensor> values = summable_values(inputs);
    comm.all_reduce(values, sdk::ReduceOp::Avg);
    return placed_means(compressor, inputs, values);
  }
  if (const auto dense = compressor.dense_quantization())
    return sdk::quantized_mean_async(comm, dense_payloads(*dense, inputs), collective).wait();
  const Wire wire = wire_of(inputs);
  std::vector<at::Tensor> gathered;
  for (auto& by_rank : comm.all_gather(wire.tensors)) {
    EXOGYM_CHECK_INTERNAL(by_rank.size() == wire.tensors.size(), "all_gather returned another tensor count");
    gathered.insert(gathered.end(), by_rank.begin(), by_rank.end());
  }
  return gathered_means(compressor, inputs, wire, gathered);
}

sdk::Pending compressed_mean_async(sdk::Communicator& comm, const Compressor& compressor,
                                   const std::vector<CompressedInput>& inputs, sdk::QuantCollective collective) {
  // The runtime moves the data when a collective starts (sdk/pending.h), so
  // the means are made now; the handle holds them until the transfer ends.
  if (compressor.summable()) {
    return comm.all_reduce_async(summable_values(inputs), sdk::ReduceOp::Avg)
        .and_then(
            [&](std::vector<at::Tensor> averaged) { return holding(placed_means(compressor, inputs, averaged)); });
  }
  if (const auto dense = compressor.dense_quantization())
    return sdk::quantized_mean_async(comm, dense_payloads(*dense, inputs), collective);
  const Wire wire = wire_of(inputs);
  return comm.all_gather_async(wire.tensors).and_then([&](std::vector<at::Tensor> gathered) {
    return holding(gathered_means(compressor, inputs, wire, gathered));
  });
}

}  // namespace exogym::modules
