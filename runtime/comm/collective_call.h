#pragma once
// One node's call of a collective, as the backends receive it, and the SPMD
// contract between the calls of one collective: every node calls the same
// collective with matching arguments.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "exogym/sdk/comm.h"

namespace exogym::runtime::comm {

// Fixed values: the hierarchical backend sends them between processes.
enum class CollectiveKind : int32_t { AllReduce, Broadcast, AllGather, Barrier };

// "all_reduce", "broadcast", ...; a value from another process may be none
// of them: "an unknown collective".
const char* collective_name(int32_t kind);
inline const char* collective_name(CollectiveKind kind) { return collective_name(static_cast<int32_t>(kind)); }

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::Barrier;
  sdk::ReduceOp op = sdk::ReduceOp::Sum;  // all_reduce
  // all_reduce_shared: the node takes a result its process's nodes share
  // (CollectiveBackend::run returns it) and its tensors are only read.
  bool shared_result = false;
  int root = 0;  // broadcast
  // The node's tensors, contiguous; results are written into them. Held by
  // value: if a node leaves early (it failed), the storage others may still
  // be reading stays alive until the collective is over.
  std::vector<at::Tensor> tensors;
  // all_gather: where the node's result goes.
  std::vector<std::vector<at::Tensor>>* gathered = nullptr;
};

// The function the node called: collective_name, or "all_reduce_shared".
const char* collective_name(const CollectiveCall& call);

// Throws sdk::Error, naming both nodes and saying what differs, unless node
// `rank`'s call matches node `reference_rank`'s: the same collective (and
// all_reduce_shared on both or neither), op, root and tensor shapes and
// dtypes (all_gather: only the same number of tensors, whose shapes may
// differ between nodes).
void check_same_collective(const CollectiveCall& call, int rank, const CollectiveCall& reference, int reference_rank);

}  // namespace exogym::runtime::comm
