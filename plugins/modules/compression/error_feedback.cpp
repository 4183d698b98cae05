#include "exogym/modules/compression/error_feedback.h"

#include <cmath>

#include "exogym/sdk/error.h"

namespace exogym::modules {

ErrorFeedback::ErrorFeedback(float decay) : decay_(decay) {
  if (!(decay >= 0.0f && decay <= 1.0f)) {
    throw sdk::Error("error feedback: decay must be in [0, 1], got " + std::to_string(decay));
  }
}

CompressedTensor ErrorFeedback::compress(size_t slot, const Compressor& compressor, const at::Tensor& tensor,
                                         uint64_t shared_seed) {
  at::Tensor compensated = tensor.detach().to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
  const at::Tensor kept = residual(slot);
  if (kept.defined()) {
    if (kept.sizes() != tensor.sizes()) {
      throw sdk::Error("error feedback slot " + std::to_string(slot) + ": a tensor of shape " +
                       c10::str(tensor.sizes()) + " after a residual of shape " + c10::str(kept.sizes()));
    }
    // A product, then a sum: add_'s alpha may fuse them into one rounding
    // on some CPUs and not on others.
    compensated.add_(decay_ == 1.0f ? kept : kept.mul(decay_));
  }
  CompressedTensor payload = compressor.compress(compensated, shared_seed);
  const at::Tensor sent = compressor.decompress(payload, compensated.numel(), shared_seed);
  if (slot >= residuals_.size()) residuals_.resize(slot + 1);
  residuals_[slot] = compensated.sub_(sent.view(compensated.sizes()));
  return payload;
}

at::Tensor ErrorFeedback::residual(size_t slot) const {
  return slot < residuals_.size() ? residuals_[slot] : at::Tensor();
}

void ErrorFeedback::save_state(sdk::StateDict& out, const std::string& prefix) const {
  for (size_t slot = 0; slot < residuals_.size(); ++slot) {
    if (residuals_[slot].defined()) out[prefix + std::to_string(slot)] = residuals_[slot];
  }
}

void ErrorFeedback::load_state(const sdk::StateDict& in, const std::string& prefix) {
  std::vector<at::Tensor> loaded;
  for (auto it = in.lower_bound(prefix); it != in.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string number = it->first.substr(prefix.size());
    const bool digits =
        !number.empty() && number.size() <= 9 && number.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw sdk::Error("error feedback state: key \"" + it->first + "\" does not end in a slot number");
    if (!it->second.defined() || !c10::isFloatingType(it->second.scalar_type())) {
      throw sdk::Error("error feedback state: \"" + it->first + "\" is not a floating-point tensor");
    }
    const size_t slot = std::stoul(number);
    if (slot >= loaded.size()) loaded.resize(slot + 1);
    // A copy: the checkpoint's tensors belong to the runtime.
    loaded[slot] = it->second.detach().to(at::kCPU, at::kFloat, false, /*copy=*/true).contiguous();
  }
  residuals_ = std::move(loaded);
}

}  // namespace exogym::modules
