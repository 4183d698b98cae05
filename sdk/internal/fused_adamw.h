#pragma once
// AdamW whose CPU step makes one pass over each parameter instead of
// LibTorch's ten (mul_, add_, mul_, addcmul_, sqrt, div, add_, mul_,
// addcdiv_ and a temporary), with results bit-identical to
// torch::optim::AdamW's. With many nodes a node's parameters and moments
// come from memory, not cache, at the first step after it waited for the
// others, and the passes made AdamW the largest part of a small model's step.
//
// Bit-identical: every element goes through the same float operations, in
// the same order and with the same fused multiply-adds, as LibTorch's
// vectorised CPU kernels. Since those depend on how LibTorch was built and
// on the CPU (no FMA below AVX2), the fused step is used only after a probe
// in this process found it equal, bit for bit, to torch::optim::AdamW on a
// few steps of small tensors; otherwise, and for anything but dense,
// contiguous fp32 CPU tensors, or with amsgrad, step() is LibTorch's own.
// EXOGYM_FUSED_ADAMW=0 in the environment turns the fused step off.
//
// On a GPU (any device but the CPU) step() takes LibTorch's multi-tensor
// AdamW kernel instead (at::_fused_adamw_, PyTorch's `fused=True`, LibTorch
// 2 and later): one launch for all of a group's parameters instead of about
// ten per parameter. Its rounding differs from torch::optim::AdamW's
// per-parameter kernels (docs/gpu.md#what-differs-on-a-gpu); runs stay
// reproducible bit for bit on the same GPU.
//
// The state is LibTorch's (AdamWParamState: step, exp_avg, exp_avg_sq), so
// checkpoints (optim_state.h) and state_dict code see no difference.
//
// A detail of the SDK's optimizers, not part of the contract: not installed
// and on no plugin's include path. A plugin gets it from OptimizerSpec::build
// ("adamw"), as a torch::optim::AdamW.
#include <torch/optim/adamw.h>

namespace exogym::sdk::internal {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;

  // Whether the last step() took the fused path, on the CPU or on a device
  // (for tests and benchmarks).
  bool last_step_fused() const { return last_step_fused_; }
  // The device path's step on any tensors, the CPU's included (tests
  // compare it with LibTorch's AdamW on machines without a GPU). False,
  // having changed nothing, where the kernel is missing (LibTorch 1.x) or a
  // group's tensors are not dense floating tensors of one device and dtype,
  // or use amsgrad.
  bool multi_tensor_step();
  // Whether this process's LibTorch and CPU allow the fused path: the
  // probe above, run once per process.
  static bool available();

 private:
  // The fused step, if every parameter with a gradient (and its state) is
  // a contiguous fp32 CPU tensor and no group uses amsgrad; otherwise it
  // returns false having changed nothing.
  bool fused_step();
  // EXOGYM_FUSED_ADAMW is not 0.
  static bool switched_on();
  // The first parameter with a gradient is not on the CPU.
  bool on_device() const;

  bool last_step_fused_ = false;
};

}  // namespace exogym::sdk::internal
