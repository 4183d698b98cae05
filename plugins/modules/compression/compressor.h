#pragma once
// The compression library's contract: a Compressor turns a tensor into what
// one node sends of it (a CompressedTensor) and adds what a received one
// stands for into a dense sum; compressed_mean and compressed_mean_async
// average such payloads over the nodes: the one way to average what a
// strategy sends compressed, in low bits included. error_feedback.h keeps
// what compression lost, so it is sent later rather than dropped
// (docs/compression.md#the-compression-library).
//
// The compressors (each in its own header):
//   ChunkTopKCompressor  topk_compressor.h  the k largest magnitudes per chunk
//   RandomKCompressor    random_k.h         k positions per chunk drawn from a shared seed
//   SignCompressor       sign_compressor.h  one sign bit per value, one scale per block
//   QuantizeCompressor   quantize_compressor.h  every value in a low-bit format (sdk/quantize.h)
// make_compressor (make_compressor.h) builds one from a strategy's options.
//
// Every compressor reads its input flat, in row-major order, as fp32 on the
// CPU, and is a pure function of the input, its settings and `shared_seed`:
// the same bits on every machine and for any number of threads. A payload's
// bytes are exactly Compressor::bytes(numel), the closed form each header
// gives, and that is what the collectives count. A compressor is immutable
// after construction, so the nodes of a process may share one.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/pending.h"
#include "exogym/sdk/quantized_comm.h"

namespace exogym::modules {

// What one node sends of one tensor: the tensors that travel, 1-D, on the
// CPU. Their layout is the compressor's own.
struct CompressedTensor {
  std::vector<at::Tensor> wire;
  int64_t bytes() const;  // Σ numel * element size over `wire`
};

class Compressor {
 public:
  virtual ~Compressor() = default;

  // What is sent of `tensor` (any floating dtype, any device). `shared_seed`
  // is the same on every node for the same tensor and round (derive it with
  // sdk::derive_seed from the run's seed, the round and the tensor's index):
  // a compressor that draws (random-k) draws from it alone, so that every
  // node knows the positions without sending them. Throws sdk::Error for
  // settings the tensor cannot take (a chunk of more than 2^31 values).
  virtual CompressedTensor compress(const at::Tensor& tensor, uint64_t shared_seed) const = 0;

  // Adds the values `payload` stands for into `dense`, a contiguous flat
  // fp32 CPU tensor of the compressed tensor's numel values; `shared_seed`
  // as given to compress(). Throws sdk::Error when the payload does not fit
  // `dense` (a payload received from elsewhere).
  virtual void add_to(at::Tensor& dense, const CompressedTensor& payload, uint64_t shared_seed) const = 0;

  // Exactly what compress() of a tensor of `numel` values sends, in bytes.
  virtual int64_t bytes(int64_t numel) const = 0;

  // True when every node's payload of a tensor holds its values in one fp32
  // tensor, at positions that depend only on numel and the shared seed
  // (random-k without quantisation): compressed_mean then sums the payloads
  // with an all_reduce instead of gathering them, 2 (R-1)/R instead of
  // R - 1 payloads per node.
  virtual bool summable() const { return false; }

  // A compressor that sends every value in one low-bit format, (codes,
  // scales) as sdk::quantize makes them (QuantizeCompressor), says which:
  // compressed_mean then averages its payloads with the SDK's low-bit
  // collective (sdk::quantized_mean_async), by default its reduce-scatter.
  struct DenseQuantization {
    sdk::QuantFormat format;
    int64_t block;
  };
  virtual std::optional<DenseQuantization> dense_quantization() const { return std::nullopt; }

  // A short description for logs and errors: "top-k 3% of chunks of 4096, int2".
  virtual std::string describe() const = 0;

  // The values `payload` stands for alone: zero elsewhere, flat fp32 on the CPU.
  at::Tensor decompress(const CompressedTensor& payload, int64_t numel, uint64_t shared_seed) const;
};

// One tensor to average: this node's payload, the tensor's shape, and the
// shared seed it was compressed with.
struct CompressedInput {
  CompressedTensor payload;
  std::vector<int64_t> shape;
  uint64_t shared_seed = 0;
};

// The mean over the nodes of every input: result[i] is fp32 on the CPU,
// shaped inputs[i].shape. Every node calls it with the same compressor and
// tensors of the same shapes, as with any collective.
//   Gathered (every other compressor): one all_gather of every input's wire
//   tensors; each node adds rank r's payload into a zero fp32 tensor for
//   r = 0, 1, ..., R-1 in that order and divides by R, the ranks the
//   all_gather brought. A ring all_gather sends (R-1) * S bytes per node,
//   S = Σ bytes(numel) (docs/simulation.md).
//   Summed (summable()): one all_reduce (Avg) of the payloads' values, then
//   placed at their positions: the same bits, 2 (R-1)/R * S bytes per node.
//   Quantized (dense_quantization()): sdk::quantized_mean_async of the
//   payloads by `collective` (sdk/quantized_comm.h): the low-bit
//   reduce-scatter, about 2 (R-1)/R * S bytes per node, or the gather.
// Throws what comm.h's collectives throw.
std::vector<at::Tensor> compressed_mean(sdk::Communicator& comm, const Compressor& compressor,
                                        const std::vector<CompressedInput>& inputs,
                                        sdk::QuantCollective collective = sdk::QuantCollective::ReduceScatter);

// The same, started at once: wait() returns what compressed_mean returns,
// bit for bit, and the transfers overlap what the node computes until then
// (sdk/pending.h). The handle saves and loads itself (sdk::Pending::save,
// sdk::Pending::load), so it may stay in flight across a checkpoint.
sdk::Pending compressed_mean_async(sdk::Communicator& comm, const Compressor& compressor,
                                   const std::vector<CompressedInput>& inputs,
                                   sdk::QuantCollective collective = sdk::QuantCollective::ReduceScatter);

}  // namespace exogym::modules
