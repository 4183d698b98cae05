#include "exogym/runtime/comm/reduction.h"

#include <ATen/ATen.h>

namespace exogym::runtime::comm {

void combine(at::Tensor& acc, const at::Tensor& x, sdk::ReduceOp op) {
  switch (op) {
    case sdk::ReduceOp::Sum:
    case sdk::ReduceOp::Avg:
      acc.add_(x);
      break;
    case sdk::ReduceOp::Min:
      at::minimum_out(acc, acc, x);
      break;
    case sdk::ReduceOp::Max:
      at::maximum_out(acc, acc, x);
      break;
  }
}

void average_sum(at::Tensor& sum, int64_t count) {
  if (at::isIntegralType(sum.scalar_type(), /*includeBool=*/true)) {
    sum.div_(count, "trunc");
  } else {
    sum.div_(count);
  }
}

}  // namespace exogym::runtime::comm
