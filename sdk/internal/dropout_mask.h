#pragma once
// The mask sdk::dropout (model.h) multiplies by, drawn from `generator`:
// one shared source for the unstacked and the stacked dropout
// (sdk/stacked.h), so that both draw the same masks, bit for bit.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace exogym::sdk::internal {

// Bernoulli(1 - p) draws scaled by 1 / (1 - p), shaped as `input` (with
// `channelwise`, an N x C x ... input: one draw per example and channel,
// broadcast over the rest), with input's dtype and device. p in (0, 1).
at::Tensor dropout_mask(const at::Tensor& input, double p, const at::Generator& generator, bool channelwise);

}  // namespace exogym::sdk::internal
