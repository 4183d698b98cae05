// HierarchicalGroup's collectives over a subgroup of the nodes (see
// hierarchical_group.h): the members of this process meet, then the last
// of them exchanges with the other processes that host members.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <string>

#include "exogym/runtime/comm/group_work.h"
#include "exogym/runtime/comm/hierarchical_group.h"
#include "exogym/runtime/comm/tensor_message.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/util/hash.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

namespace {

// What each process sends before the data: enough to check that the
// members elsewhere called the same, to size the data, and the latest
// arrival of its members for the simulated clocks.
struct GroupHeader {
  uint64_t tag = 0;
  int32_t kind = 0, op = 0, count = 0, blocks = 0;
  uint64_t signature = 0;
  uint64_t payload = 0;
  double arrival = 0;
};

uint64_t shapes_signature(const std::vector<at::Tensor>& tensors) {
  util::Fnv1a hash;
  for (const auto& t : tensors) {
    hash.add_integer(static_cast<int64_t>(t.scalar_type()));
    hash.add_integer(t.dim());
    for (int64_t s : t.sizes()) hash.add_integer(s);
  }
  return hash.digest();
}

// The tensors of `blocks` members another process (`who`) sent in
// `received`: views of the reduction's blocks, or the packed message's.
std::vector<std::vector<at::Tensor>> remote_members(const at::Tensor& received, int blocks, const TensorLayout& layout,
                                                    const CollectiveCall& first, bool reduce, const std::string& who) {
  const size_t count = first.tensors.size();
  std::vector<at::Tensor> unpacked;
  if (!reduce) {
    auto tensors = unpack_tensors(received);
    if (!tensors || tensors->size() != static_cast<size_t>(blocks) * count)
      throw sdk::Error("group_all_gather: the data from " + who + " is malformed");
    unpacked = std::move(*tensors);
  }
  std::vector<std::vector<at::Tensor>> out;
  for (int b = 0; b < blocks; ++b) {
    std::vector<at::Tensor> part;
    for (size_t i = 0; i < count; ++i) part.push_back(reduce ? layout.view(received, i, b) : unpacked[b * count + i]);
    out.push_back(std::move(part));
  }
  return out;
}

// This process's members' tensors: blocks of one layout for a reduction, a
// packed message otherwise.
at::Tensor local_members(const std::vector<CollectiveCall*>& calls, const TensorLayout& layout, bool reduce) {
  if (!reduce) {
    std::vector<at::Tensor> all;
    for (const CollectiveCall* c : calls) all.insert(all.end(), c->tensors.begin(), c->tensors.end());
    return pack_tensors(all);
  }
  at::Tensor send = at::empty({static_cast<int64_t>(calls.size()) * layout.block_bytes()}, at::kByte);
  for (size_t b = 0; b < calls.size(); ++b) {
    for (size_t i = 0; i < calls[b]->tensors.size(); ++i)
      layout.view(send, i, static_cast<int64_t>(b)).copy_(calls[b]->tensors[i]);
  }
  return send;
}

}  // namespace

void HierarchicalGroup::run_group(int rank, CollectiveCall call, threads::NodeSlot* slot) {
  const std::vector<int> members = call.members;
  std::vector<int> local;
  for (int m : members) {
    if (block_.contains(m)) local.push_back(m);
  }
  groups_.meet(rank, std::move(call), local, slot, [&](const std::vector<CollectiveCall*>& calls, uint64_t meeting) {
    if (local.size() == members.size()) {
      share_group_arrival(clocks_, local, -std::numeric_limits<double>::infinity());
      std::vector<const std::vector<at::Tensor>*> parts;
      for (const CollectiveCall* c : calls) parts.push_back(&c->tensors);
      complete_group(calls, parts);
      return;
    }
    exchange_group(members, local, calls, meeting);
  });
}

void HierarchicalGroup::exchange_group(const std::vector<int>& members, const std::vector<int>& local,
                                       const std::vector<CollectiveCall*>& calls, uint64_t meeting) {
  const CollectiveCall& first = *calls.front();
  const bool reduce = first.kind == CallKind::AllReduce;
  const int P = mesh_.size(), me = mesh_.rank();
  std::vector<int> peers;  // the other processes that host members, ascending
  for (int m : members) {
    const int q = dist::process_of_node(m, nodes_, P);
    if (q != me && (peers.empty() || peers.back() != q)) peers.push_back(q);
  }
  // The same tag in every process: the group and its count of meetings.
  util::Fnv1a hash;
  for (int m : members) hash.add_integer(m);
  hash.add_integer(static_cast<int64_t>(meeting));
  const uint64_t tag = (hash.digest() << 2) >> 1;  // even, below the top bit: +1 for the data

  const TensorLayout layout(first.tensors);
  const at::Tensor send = local_members(calls, layout, reduce);
  GroupHeader mine;
  mine.tag = tag;
  mine.kind = static_cast<int32_t>(first.kind);
  mine.op = reduce ? static_cast<int32_t>(first.op) : 0;
  mine.count = static_cast<int32_t>(first.tensors.size());
  mine.blocks = static_cast<int32_t>(local.size());
  mine.signature = reduce ? shapes_signature(first.tensors) : 0;
  mine.payload = static_cast<uint64_t>(send.numel());
  mine.arrival = latest_group_arrival(clocks_, local);

  std::vector<GroupHeader> headers(P);
  std::vector<dist::ProcessMesh::PeerMessage> transfers;
  for (int q : peers) {
    transfers.push_back({q, &headers[q], sizeof(GroupHeader), true});
    transfers.push_back({q, &mine, sizeof(GroupHeader), false});
  }
  mesh_.exchange_tagged(transfers, tag);
  double remote = -std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> received(P);
  transfers.clear();
  for (int q : peers) {
    const GroupHeader& h = headers[q];
    int expected_blocks = 0;
    for (int m : members) expected_blocks += dist::process_of_node(m, nodes_, P) == q ? 1 : 0;
    if (h.tag != tag || h.kind != mine.kind || h.op != mine.op || h.count != mine.count ||
        h.signature != mine.signature || h.blocks != expected_blocks ||
        (reduce && h.payload != static_cast<uint64_t>(expected_blocks * layout.block_bytes()))) {
      throw sdk::Error("collective mismatch between processes: in " + describe_call(first) + ", the members in " +
                       mesh_.describe(q) + " called something else (another collective, op, or tensors)");
    }
    remote = std::max(remote, h.arrival);
    received[q] = at::empty({static_cast<int64_t>(h.payload)}, at::kByte);
    if (h.payload > 0) transfers.push_back({q, received[q].data_ptr(), h.payload, true});
    if (mine.payload > 0) transfers.push_back({q, send.data_ptr(), mine.payload, false});
  }
  mesh_.exchange_tagged(transfers, tag + 1);
  share_group_arrival(clocks_, local, remote);

  // Every member's tensors in rank order: processes host contiguous blocks.
  std::vector<std::vector<at::Tensor>> remote_parts;  // by member, for those elsewhere
  std::vector<const std::vector<at::Tensor>*> parts;
  for (int q : peers) {
    const auto theirs = remote_members(received[q], headers[q].blocks, layout, first, reduce, mesh_.describe(q));
    remote_parts.insert(remote_parts.end(), theirs.begin(), theirs.end());
  }
  for (size_t j = 0, next_local = 0, next_remote = 0; j < members.size(); ++j) {
    const bool here = dist::process_of_node(members[j], nodes_, P) == me;
    parts.push_back(here ? &calls[next_local++]->tensors : &remote_parts[next_remote++]);
  }
  complete_group(calls, parts);
}

}  // namespace exogym::runtime::comm
