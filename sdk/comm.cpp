#include "exogym/sdk/comm.h"

#include <string>

#include "exogym/sdk/error.h"

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

namespace {
[[noreturn]] void no_subgroups(const char* collective) {
  throw Error(std::string(collective) + ": this communicator does not support subgroups or peers");
}
}  // namespace

void Communicator::group_all_reduce(const std::vector<int>&, std::vector<at::Tensor>&, ReduceOp) {
  no_subgroups("group_all_reduce");
}

std::vector<std::vector<at::Tensor>> Communicator::group_all_gather(const std::vector<int>&,
                                                                    const std::vector<at::Tensor>&) {
  no_subgroups("group_all_gather");
}

std::vector<at::Tensor> Communicator::exchange(int, const std::vector<at::Tensor>&) { no_subgroups("exchange"); }

void Communicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  std::vector<at::Tensor> list{tensor};
  all_reduce(list, op);
}

void Communicator::broadcast(const at::Tensor& tensor, int root) {
  std::vector<at::Tensor> list{tensor};
  broadcast(list, root);
}

std::vector<at::Tensor> Communicator::all_gather(const at::Tensor& tensor) {
  std::vector<at::Tensor> result;
  for (auto& per_rank : all_gather(std::vector<at::Tensor>{tensor})) result.push_back(per_rank.at(0));
  return result;
}

}  // namespace exogym::sdk
