#pragma once
// The work of a collective over a subgroup (group_meetings.h), the same in
// every backend so that results have the same bits: all_reduce folds the
// members' tensors in rank order (combine, then average_sum: reduction.h),
// all_gather gives every local member fresh copies in rank order.
#include <ATen/core/Tensor.h>

#include <vector>

#include "exogym/runtime/comm/collective_call.h"

namespace exogym::runtime::sim {
class ClockExchange;
}

namespace exogym::runtime::comm {

// `parts[j]`: the tensors of the group's j-th member (every member, in rank
// order: a local call's tensors, or what another process sent); `local`:
// the calls of the members this process hosts, whose tensors or gathered
// results receive the result.
void complete_group(const std::vector<CollectiveCall*>& local,
                    const std::vector<const std::vector<at::Tensor>*>& parts);

// The members' latest arrival: `remote` (another process's members', or
// -infinity) and the local members' posts, recorded for each local member.
// Nothing without clocks.
void share_group_arrival(sim::ClockExchange* clocks, const std::vector<int>& local_ranks, double remote);
double latest_group_arrival(sim::ClockExchange* clocks, const std::vector<int>& local_ranks);

}  // namespace exogym::runtime::comm
