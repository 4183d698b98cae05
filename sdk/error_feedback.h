#pragma once
// Error feedback for low-bit payloads (quantize.h): what quantising a tensor
// lost is added to the next tensor sent in its place, so that rounding
// errors are delayed rather than dropped (the residual of EF-SGD,
// Karimireddy et al. 2019; SparseLoCo's error buffer with a decay).
//
// One residual per slot (a strategy's parameter index, say), fp32 on the
// CPU, zero until the slot's first quantize() (or keep()):
//   compensated = tensor + decay * residual
//   payload     = quantize(compensated)
//   residual    = compensated - dequantize(payload)
// so dequantize(payload) + residual == compensated: what was sent plus what
// is kept is what was to be sent (exactly, for the rounding quantize does).
//
// Checkpoints: the residuals are part of a strategy's state (strategy.h's
// save_state/load_state); saving and loading them makes a resumed run
// continue bit for bit. A node's residual is its own: a node that rejoins
// after a failure starts from none (clear()), as a restarted machine would.
// Any other compressor uses the same residuals through compensate() and
// keep() (exogym/modules/compression/compressor.h's compress_with_feedback).
// Used by one node's thread (the residuals are per node).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <vector>

#include "exogym/sdk/quantize.h"
#include "exogym/sdk/strategy.h"

namespace exogym::sdk {

class ErrorFeedback {
 public:
  // `decay` scales the residual before it is added (1: plain error
  // feedback). Throws sdk::Error unless it is finite and in [0, 1].
  explicit ErrorFeedback(float decay = 1.0f);

  // The payload of tensor + decay * residual(slot), recorded with the
  // tensor's dtype and device; updates residual(slot). Throws sdk::Error
  // when the slot's residual has another shape than `tensor` (a strategy
  // bug, or a checkpoint of another model).
  QuantizedPayload quantize(size_t slot, const at::Tensor& tensor, QuantFormat format,
                            int64_t block_size = kDefaultQuantBlock);

  // The two halves of quantize() for any compressor: compensate() returns
  // tensor + decay * residual(slot) as a fresh fp32 CPU tensor (the same
  // shape check); keep() makes compensated - sent the slot's residual
  // (`compensated` is reused, `sent` is what the payload decodes to, fp32
  // on the CPU, of compensated's numel).
  at::Tensor compensate(size_t slot, const at::Tensor& tensor) const;
  void keep(size_t slot, at::Tensor compensated, const at::Tensor& sent);

  // The slot's residual (shaped as its tensors, fp32, CPU); undefined
  // before its first quantize().
  at::Tensor residual(size_t slot) const;
  float decay() const { return decay_; }
  // Forgets every residual.
  void clear() { residuals_.clear(); }

  // Each defined residual under "<prefix><slot>"; the tensors alias the
  // residuals (write them out before the next quantize()).
  void save_state(StateDict& out, const std::string& prefix) const;
  // Replaces the residuals with the "<prefix><slot>" entries of `in` (none:
  // no residuals). Every key starting with `prefix` must end in a slot
  // number: sdk::Error names a key that does not, or a tensor that is not
  // floating-point.
  void load_state(const StateDict& in, const std::string& prefix);

 private:
  float decay_;
  std::vector<at::Tensor> residuals_;
};

}  // namespace exogym::sdk
