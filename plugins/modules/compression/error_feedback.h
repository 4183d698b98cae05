#pragma once
// Error feedback around any compressor (compressor.h): what compressing a
// tensor lost is added to the next tensor sent in its place, so that
// compression errors are delayed rather than dropped (the residual of
// EF-SGD, Karimireddy et al. 2019; SparseLoCo's error buffer with a decay)
// (docs/compression.md#error-feedback).
//
// One residual per slot (a strategy's parameter index, say), fp32 on the
// CPU, zero until the slot's first compress():
//   compensated = tensor + decay * residual
//   payload     = compressor.compress(compensated)
//   residual    = compensated - what the payload stands for
// so what was sent plus what is kept is what was to be sent, exactly.
//
// Checkpoints: the residuals are part of a strategy's state (save_state,
// load_state); saving and loading them makes a resumed run continue bit for
// bit. A node's residuals are its own: a node that rejoins after a failure
// starts from none (clear()), as a restarted machine would. Used by one
// node's thread (the residuals are per node).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "exogym/modules/compression/compressor.h"
#include "exogym/sdk/state_dict.h"

namespace exogym::modules {

class ErrorFeedback {
 public:
  // `decay` scales the residual before it is added (1: plain error
  // feedback). Throws sdk::Error unless it is finite and in [0, 1].
  explicit ErrorFeedback(float decay = 1.0f);

  // What `compressor` sends of tensor + decay * residual(slot)
  // (`shared_seed` as Compressor::compress takes it); the slot's residual
  // becomes that minus what the payload stands for. Throws sdk::Error when
  // the slot's residual has another shape than `tensor` (a strategy bug, or
  // a checkpoint of another model).
  CompressedTensor compress(size_t slot, const Compressor& compressor, const at::Tensor& tensor,
                            uint64_t shared_seed = 0);

  // The slot's residual (shaped as its tensors, fp32, CPU); undefined
  // before its first compress().
  at::Tensor residual(size_t slot) const;
  float decay() const { return decay_; }
  // Forgets every residual.
  void clear() { residuals_.clear(); }

  // Each defined residual under "<prefix><slot>"; the tensors alias the
  // residuals (write them out before the next compress()).
  void save_state(sdk::StateDict& out, const std::string& prefix) const;
  // Replaces the residuals with the "<prefix><slot>" entries of `in` (none:
  // no residuals). Every key starting with `prefix` must end in a slot
  // number: sdk::Error names a key that does not, or a tensor that is not
  // floating-point.
  void load_state(const sdk::StateDict& in, const std::string& prefix);

 private:
  float decay_;
  std::vector<at::Tensor> residuals_;
};

}  // namespace exogym::modules
