#include "exogym/modules/compression/compressor.h"

#include <ATen/ATen.h>

#include "exogym/sdk/error.h"

namespace exogym::modules {

namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Every payload's values summed with one all_reduce: the compressor says
// each payload is one fp32 tensor at positions every node knows.
std::vector<at::Tensor> summed_mean(sdk::Communicator& comm, const Compressor& compressor,
                                    const std::vector<CompressedInput>& inputs) {
  std::vector<at::Tensor> values;
  for (const auto& in : inputs) {
    EXOGYM_CHECK_INTERNAL(in.payload.wire.size() == 1, "a summable payload is one tensor");
    values.push_back(in.payload.wire[0].clone());
  }
  comm.all_reduce(values, sdk::ReduceOp::Avg);
  std::vector<at::Tensor> means;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor mean = at::zeros({numel_of(inputs[i].shape)}, at::kFloat);
    compressor.add_to(mean, CompressedTensor{{values[i]}}, inputs[i].shared_seed);
    means.push_back(mean.reshape(inputs[i].shape));
  }
  return means;
}

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
  if (compressor.summable()) return summed_mean(comm, compressor, inputs);
  // Low-bit payloads of every value: the SDK's one quantized average.
  const auto dense = compressor.dense_quantization();
  if (dense) {
    std::vector<sdk::QuantizedPayload> payloads;
    for (const auto& in : inputs) {
      if (in.payload.wire.size() != 2) throw sdk::Error("quantized payload: expected codes and scales");
      sdk::QuantizedPayload p;
      p.format = dense->format;
      p.block_size = dense->block;
      p.shape = in.shape;
      p.codes = in.payload.wire[0];
      p.scales = in.payload.wire[1];
      payloads.push_back(std::move(p));
    }
    return sdk::quantized_mean_async(comm, payloads, collective).wait();
  }
  std::vector<at::Tensor> wire;
  std::vector<size_t> first;  // where each input's tensors start in `wire`
  for (const auto& in : inputs) {
    first.push_back(wire.size());
    for (const auto& t : in.payload.wire) wire.push_back(t);
  }
  const auto gathered = comm.all_gather(wire);
  std::vector<at::Tensor> means;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor sum = at::zeros({numel_of(inputs[i].shape)}, at::kFloat);
    const size_t count = inputs[i].payload.wire.size();
    for (const auto& by_rank : gathered) {
      // The counts were checked by the all_gather: every rank sends as many.
      EXOGYM_CHECK_INTERNAL(by_rank.size() == wire.size(), "all_gather returned another tensor count");
      CompressedTensor payload;
      payload.wire.assign(by_rank.begin() + static_cast<std::ptrdiff_t>(first[i]),
                          by_rank.begin() + static_cast<std::ptrdiff_t>(first[i] + count));
      compressor.add_to(sum, payload, inputs[i].shared_seed);
    }
    // As all_reduce's Avg and sdk::mean_of_payloads: the sum, then / R.
    sum.div_(static_cast<double>(gathered.size()));
    means.push_back(sum.reshape(inputs[i].shape));
  }
  return means;
}

CompressedTensor compress_with_feedback(sdk::ErrorFeedback& feedback, size_t slot, const Compressor& compressor,
                                        const at::Tensor& tensor, uint64_t shared_seed) {
  at::Tensor compensated = feedback.compensate(slot, tensor);
  CompressedTensor payload = compressor.compress(compensated, shared_seed);
  feedback.keep(slot, compensated, compressor.decompress(payload, compensated.numel(), shared_seed));
  return payload;
}

}  // namespace exogym::modules
