#include "exogym/sdk/model.h"

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <sstream>
#include <string>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/dropout_mask.h"

namespace exogym::sdk {

namespace internal {

at::Tensor dropout_mask(const at::Tensor& input, double p, const at::Generator& generator, bool channelwise) {
  std::vector<int64_t> mask_shape = input.sizes().vec();
  if (channelwise) {
    if (input.dim() < 2)
      throw Error("dropout: channel-wise dropout needs an N x C x ... input, got " + std::to_string(input.dim()) +
                  " dimension(s)");
    // One draw per (example, channel), broadcast over the spatial dimensions.
    for (size_t d = 2; d < mask_shape.size(); ++d) mask_shape[d] = 1;
  }
  // An undefined generator means "the default one"; pass nullopt rather than
  // relying on every ATen kernel to treat an undefined generator that way.
  c10::optional<at::Generator> source;
  if (generator.defined()) source = generator;
  // ATen refuses a generator of another device type (a CPU generator for a
  // CUDA input): draw the mask where the generator lives, then move it.
  const bool elsewhere = source && source->device().type() != input.device().type();
  at::Tensor mask = input.new_empty(mask_shape, elsewhere ? input.options().device(source->device()) : input.options())
                        .bernoulli_(1.0 - p, source);
  mask.div_(1.0 - p);  // as torch's dropout: the expected activation is unchanged
  return elsewhere ? mask.to(input.device()) : mask;
}

}  // namespace internal

at::Tensor dropout(const at::Tensor& input, double p, bool training, const at::Generator& generator, bool channelwise) {
  if (!(p >= 0.0 && p < 1.0)) throw Error("dropout: probability must be in [0, 1), got " + std::to_string(p));
  if (!training || p == 0.0) return input;
  return input.mul(internal::dropout_mask(input, p, generator, channelwise));
}

at::Tensor Model::next_token_logits(const at::Tensor& /*tokens*/) {
  throw Error("this model does not predict tokens (it does not implement next_token_logits)");
}

at::Tensor Model::stacked_loss(const Stack& /*stack*/, const Batch& /*batch*/) {
  throw Error("this model does not compute stacked losses (it does not implement stacked_loss)");
}

const at::Tensor& batch_tensor(const Batch& batch, const std::string& key) {
  auto it = batch.find(key);
  if (it == batch.end() || !it->second.defined()) {
    std::string keys;
    for (const auto& item : batch) keys += (keys.empty() ? "" : ", ") + item.first;
    throw Error("the batch has no \"" + key + "\" tensor (it has: " + (keys.empty() ? "nothing" : keys) + ")");
  }
  return it->second;
}

std::string shape_of(const at::Tensor& tensor) {
  std::ostringstream out;
  out << tensor.sizes();
  return out.str();
}

}  // namespace exogym::sdk
