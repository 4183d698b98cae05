#include "exogym/sdk/comm.h"

namespace exogym::sdk {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
  }
  return "unknown";
}

SharedTensors Communicator::all_reduce_shared(const std::vector<at::Tensor>& tensors, ReduceOp op) {
  auto copies = std::make_shared<std::vector<at::Tensor>>();
  copies->reserve(tensors.size());
  for (const auto& t : tensors) copies->push_back(t.clone());
  all_reduce(*copies, op);
  return copies;
}

}  // namespace exogym::sdk
