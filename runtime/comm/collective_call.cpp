#include "exogym/runtime/comm/collective_call.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

const char* const kDeadlockAdvice =
    " (every member of a group must call the group's collectives in the same order; for exchanges between pairs, "
    "both nodes of a pair must reach their exchange with each other at the same point: on a ring, the nodes at even "
    "positions exchange with their right neighbour first and their left second, the nodes at odd positions the other "
    "way round; all of them right first waits forever)";

const char* collective_name(int32_t kind) {
  static const char* names[] = {"all_reduce", "broadcast", "all_gather", "barrier"};
  return kind >= 0 && kind < 4 ? names[kind] : "an unknown collective";
}

const char* collective_name(const CollectiveCall& call) {
  if (call.exchange) return "exchange";
  if (!call.members.empty()) return call.kind == CallKind::AllReduce ? "group_all_reduce" : "group_all_gather";
  return call.shared_result ? "all_reduce_shared" : collective_name(call.kind);
}

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}
}  // namespace

std::string describe_call(const CollectiveCall& call) {
  if (call.exchange && call.members.size() == 2) {
    return "exchange between nodes " + std::to_string(call.members[0]) + " and " + std::to_string(call.members[1]);
  }
  if (!call.members.empty()) return std::string(collective_name(call)) + " over nodes " + rank_list(call.members);
  return std::string(collective_name(call)) + " over every live node";
}

void check_group(const char* collective, int rank, const std::vector<int>& members, const std::vector<int>& live) {
  const std::string who = std::string(collective) + " by node " + std::to_string(rank) + ": ";
  if (members.size() < 2) {
    throw sdk::Error(who + "a group needs two members or more, got " + rank_list(members));
  }
  for (size_t i = 1; i < members.size(); ++i) {
    if (members[i] <= members[i - 1]) {
      throw sdk::Error(who + "the members " + rank_list(members) + " are not in ascending order without repeats");
    }
  }
  if (!std::binary_search(members.begin(), members.end(), rank)) {
    throw sdk::Error(who + "the members " + rank_list(members) + " do not include the node itself");
  }
  for (int m : members) {
    if (!std::binary_search(live.begin(), live.end(), m)) {
      throw sdk::Error(who + "node " + std::to_string(m) + " is not a live node (live: " + rank_list(live) + ")");
    }
  }
}

void check_same_collective(const CollectiveCall& call, int rank, const CollectiveCall& reference, int reference_rank) {
  // A mismatch is a strategy bug: say exactly where.
  auto where = [&] {
    const bool group = !call.members.empty() || !reference.members.empty();
    return std::string("collective mismatch: node ") + std::to_string(rank) + " called " +
           (group ? describe_call(call) : collective_name(call)) + " while node " + std::to_string(reference_rank) +
           " called " + (group ? describe_call(reference) : collective_name(reference));
  };
  if (call.kind != reference.kind || call.shared_result != reference.shared_result ||
      call.exchange != reference.exchange || call.members != reference.members)
    throw sdk::Error(where());
  if (call.tensors.size() != reference.tensors.size()) {
    throw sdk::Error(where() + " with " + std::to_string(call.tensors.size()) + " tensors instead of " +
                     std::to_string(reference.tensors.size()));
  }
  if (call.kind == CallKind::AllGather || call.kind == CallKind::Barrier) return;
  if (call.op != reference.op || call.root != reference.root)
    throw sdk::Error(where() + " with a different op or root");
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    const auto& a = call.tensors[i];
    const auto& b = reference.tensors[i];
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
      std::ostringstream s;
      s << where() << ": tensor " << i << " is " << a.sizes() << " " << a.scalar_type() << " on node " << rank
        << " but " << b.sizes() << " " << b.scalar_type() << " on node " << reference_rank;
      throw sdk::Error(s.str());
    }
  }
}

}  // namespace exogym::runtime::comm
