#pragma once
// One node's call of a collective, as the backends receive it, and the SPMD
// contract between the calls of one collective: every node calls the same
// collective with matching arguments.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exogym/sdk/comm.h"

namespace exogym::runtime::comm {

// What a node called (sim::CollectiveKind is what the network model
// meters). Fixed values: the hierarchical backend sends them between
// processes.
enum class CallKind : int32_t { AllReduce, Broadcast, AllGather, Barrier };

// "all_reduce", "broadcast", ...; a value from another process may be none
// of them: "an unknown collective".
const char* collective_name(int32_t kind);
inline const char* collective_name(CallKind kind) { return collective_name(static_cast<int32_t>(kind)); }

struct CollectiveCall {
  CallKind kind = CallKind::Barrier;
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
  // group_all_reduce, group_all_gather, exchange: the members (global
  // ranks, ascending); empty for a collective over every live node.
  std::vector<int> members;
  bool exchange = false;  // a group_all_gather that the node called as exchange()
};

// The function the node called: collective_name, "all_reduce_shared",
// "group_all_reduce", "group_all_gather" or "exchange".
const char* collective_name(const CollectiveCall& call);

// Throws sdk::Error, naming both nodes and saying what differs, unless node
// `rank`'s call matches node `reference_rank`'s: the same collective (and
// all_reduce_shared on both or neither), op, root and tensor shapes and
// dtypes (all_gather: only the same number of tensors, whose shapes may
// differ between nodes).
void check_same_collective(const CollectiveCall& call, int rank, const CollectiveCall& reference, int reference_rank);

// "group_all_reduce over nodes [1, 3]", "exchange between nodes 1 and 3",
// "all_reduce over every live node".
std::string describe_call(const CollectiveCall& call);

// What a deadlock's message advises (group_meetings.h, cross_process_waits.h):
// the order that avoids one, for group collectives and pairwise exchanges.
extern const char* const kDeadlockAdvice;

// Throws sdk::Error naming the collective and node `rank` unless `members`
// is a group node `rank` may call: ascending, no repeats, two or more,
// `rank` among them, every one in `live` (ascending).
void check_group(const char* collective, int rank, const std::vector<int>& members, const std::vector<int>& live);

}  // namespace exogym::runtime::comm
