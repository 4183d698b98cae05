#pragma once
// The element-wise arithmetic of an all-reduce, shared by the backends so
// that they combine values the same way (and so give the same bits).
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "exogym/sdk/comm.h"

namespace exogym::runtime::comm {

// acc = acc op x, in place. Avg adds: divide the sum with average_sum.
void combine(at::Tensor& acc, const at::Tensor& x, sdk::ReduceOp op);

// Turns a sum of `count` contributions into their average, in place.
// Integer tensors truncate, as torch.distributed does.
void average_sum(at::Tensor& sum, int64_t count);

}  // namespace exogym::runtime::comm
