#include "exogym/runtime/comm/hierarchical_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "exogym/runtime/comm/nccl_exchange.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/util/hash.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

using Scope = dist::ProcessMesh::Scope;

namespace {

// What must match between processes: every tensor's dtype and shape.
uint64_t signature(const std::vector<at::Tensor>& tensors) {
  util::Fnv1a hash;
  for (const auto& t : tensors) {
    hash.add_integer(static_cast<int64_t>(t.scalar_type()));
    hash.add_integer(t.is_cuda() ? 1 : 0);  // CUDA tensors may take another path (NCCL)
    hash.add_integer(t.dim());
    for (int64_t s : t.sizes()) hash.add_integer(s);
  }
  return hash.digest();
}

const dist::NodeBlock& checked_block(const dist::NodeBlock& block) {
  EXOGYM_CHECK_INTERNAL(!(block.count < 1), "HierarchicalGroup: a process must host at least one node");
  return block;
}

}  // namespace

HierarchicalGroup::HierarchicalGroup(dist::ProcessMesh& mesh, int nodes, dist::NodeBlock block,
                                     threads::AbortSignal& abort, sim::ClockExchange* clocks, bool exact)
    : mesh_(mesh),
      nodes_(nodes),
      block_(checked_block(block)),
      clocks_(clocks),
      exact_(exact),
      meeting_(block.count, block.first, abort, [this](const Calls& calls) { lead(calls); }),
      groups_(block.first, block.count, abort) {
  for (int r = 0; r < nodes; ++r) live_.push_back(r);
  for (int j = 0; j < block.count; ++j) local_.push_back(j);
  for (int q = 0; q < mesh.size(); ++q) live_by_process_.push_back(dist::node_block(nodes, mesh.size(), q).count);
  // A group member that waits in another process for a node here, which
  // waits for it: found with the heartbeats (cross_process_waits.h).
  mesh.watch_waits([this] { return groups_.wait_report(waits_.interest()); },
                   [this](const std::vector<std::string>& reports) { return waits_.check(reports); });
}

void HierarchicalGroup::set_members(std::vector<int> live) {
  const int P = mesh_.size();
  std::vector<int> local, by_process(P, 0), processes;
  for (int r : live) {
    ++by_process[dist::process_of_node(r, nodes_, P)];
    if (block_.contains(r)) local.push_back(r - block_.first);
  }
  for (int q = 0; q < P; ++q) {
    if (by_process[q] > 0) processes.push_back(q);
  }
  // A process that sat collectives out counted fewer: all go on from the
  // count of those that took part.
  sequence_ = mesh_.highest(sequence_);
  mesh_.set_members(processes);
  meeting_.set_expected(local);
  live_ = std::move(live);
  local_ = std::move(local);
  live_by_process_ = std::move(by_process);
}

HierarchicalGroup::~HierarchicalGroup() { mesh_.watch_waits(nullptr, nullptr); }

std::unique_ptr<sdk::Communicator> HierarchicalGroup::communicator(int rank, threads::NodeSlot* slot) {
  EXOGYM_CHECK_INTERNAL(!(!block_.contains(rank)),
                        "HierarchicalGroup: node " + std::to_string(rank) + " is not hosted by this process");
  return make_communicator(*this, rank, slot);
}

sdk::SharedTensors HierarchicalGroup::run(int rank, CollectiveCall call, threads::NodeSlot* slot) {
  if (!call.members.empty()) {
    run_group(rank, std::move(call), slot);
    return nullptr;
  }
  const std::vector<at::Tensor> mine = call.tensors;
  auto* gathered = call.gathered;
  const CallKind kind = call.kind;
  const bool receives = kind != CallKind::Broadcast || rank != call.root;
  const bool shared = call.shared_result;
  // A group that waits for this node never completes (group_meetings.h).
  groups_.enter_elsewhere(rank, "waits in " + describe_call(call));
  struct Leave {
    GroupMeetings& groups;
    int rank;
    ~Leave() { groups.leave(rank); }
  } leave{groups_, rank};
  meeting_.meet(rank - block_.first, std::move(call), slot);
  // The leader left the results in result_, shared_result_ or gathered_.
  if (shared) return shared_result_;
  switch (kind) {
    case CallKind::AllReduce:
    case CallKind::Broadcast:
      if (receives) {
        for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(result_[i]);
      }
      break;
    case CallKind::AllGather:
      gathered->assign(gathered_.size(), {});  // one entry per live node
      for (size_t r = 0; r < gathered_.size(); ++r) {
        for (size_t i = 0; i < gathered_[r].size(); ++i) {
          const auto& t = gathered_[r][i];
          // Fresh tensors on this node's device, as InProcessGroup returns.
          const auto device = i < mine.size() ? mine[i].device() : t.device();
          (*gathered)[r].push_back(t.to(t.options().device(device), /*non_blocking=*/false, /*copy=*/true));
        }
      }
      break;
    case CallKind::Barrier:
      break;
  }
  return nullptr;
}

void HierarchicalGroup::lead(const Calls& calls) {
  const CollectiveCall& first = calls[local_.front()];
  Header mine;
  mine.sequence = sequence_++;
  mine.kind = static_cast<int32_t>(first.kind);
  mine.op = first.kind == CallKind::AllReduce ? static_cast<int32_t>(first.op) : 0;
  mine.root = first.kind == CallKind::Broadcast ? first.root : 0;
  mine.count = static_cast<int32_t>(first.tensors.size());
  if (first.kind == CallKind::AllReduce || first.kind == CallKind::Broadcast) {
    mine.signature = signature(first.tensors);
  }
  if (clocks_) {
    std::vector<int> ranks;
    for (int j : local_) ranks.push_back(block_.first + j);
    if (auto local = clocks_->take_local(ranks)) {
      mine.has_arrival = 1;
      mine.arrival = local->latest;
      clock_sequence_ = local->sequence;
    }
  }
  result_.clear();
  shared_result_ = nullptr;
  gathered_.clear();
  buffers_.clear();
  switch (first.kind) {
    case CallKind::AllReduce:
      lead_all_reduce(calls, mine);
      if (first.shared_result) {
        // Fresh tensors (the fold's), on the nodes' device: CUDA tensors
        // may have travelled through host memory.
        auto shared = std::make_shared<std::vector<at::Tensor>>();
        for (size_t i = 0; i < result_.size(); ++i) shared->push_back(result_[i].to(first.tensors[i].device()));
        shared_result_ = std::move(shared);
      }
      break;
    case CallKind::Broadcast:
      lead_broadcast(calls, mine);
      break;
    case CallKind::AllGather:
      lead_all_gather(calls, mine);
      break;
    case CallKind::Barrier:
      exchange_headers(mine);
      break;
  }
  // Every node is through: none waits for anything any more, whenever it
  // gets its compute slot back. (Not before: until the other processes'
  // parts are in, a group in another process may be waiting for a node
  // here, which waits for it; cross_process_waits.h.)
  std::vector<int> ranks;
  for (int j : local_) ranks.push_back(block_.first + j);
  groups_.leave_all(ranks);
}

std::vector<HierarchicalGroup::Header> HierarchicalGroup::exchange_headers(const Header& mine) {
  const int P = mesh_.size(), me = mesh_.rank();
  std::vector<Header> headers(P);
  headers[me] = mine;
  std::vector<void*> out;
  for (auto& h : headers) out.push_back(&h);
  mesh_.all_gather(&headers[me], sizeof(Header), out, std::vector<size_t>(P, sizeof(Header)), Scope::Members);
  for (int q : mesh_.members()) {
    const Header& h = headers[q];
    auto mismatch = [&](const std::string& what) {
      return sdk::Error("collective mismatch between processes: " + mesh_.describe(q) + " called " +
                        collective_name(h.kind) + " while this process, " + mesh_.describe(me) + ", called " +
                        collective_name(mine.kind) + what + " (collective " + std::to_string(mine.sequence) + ")");
    };
    if (h.sequence != mine.sequence || h.kind != mine.kind) throw mismatch("");
    if (h.count != mine.count) throw mismatch(" with a different number of tensors");
    if (h.op != mine.op || h.root != mine.root) throw mismatch(" with a different op or root");
    if (h.signature != mine.signature) throw mismatch(" with tensors of other shapes or dtypes");
    if (h.has_arrival != mine.has_arrival) throw mismatch(" (one as strategy traffic, one as the runtime's)");
  }
  if (mine.has_arrival && clocks_) {
    double latest = mine.arrival;
    for (int q : mesh_.members()) latest = std::max(latest, headers[q].arrival);
    clocks_->share_latest(clock_sequence_, latest);
  }
  return headers;
}

void HierarchicalGroup::gather_payloads(const at::Tensor& send, const std::vector<Header>& headers) {
  const int P = mesh_.size(), me = mesh_.rank();
  std::vector<void*> out(P, nullptr);
  std::vector<size_t> sizes(P, 0);
  buffers_.assign(P, at::Tensor());
  for (int q : mesh_.members()) {
    if (q == me) {
      buffers_[q] = send;
      continue;
    }
    buffers_[q] = at::empty({static_cast<int64_t>(headers[q].payload)}, at::kByte);
    out[q] = buffers_[q].data_ptr();
    sizes[q] = headers[q].payload;
  }
  mesh_.all_gather(send.data_ptr(), headers[me].payload, out, sizes, Scope::Members);
}

}  // namespace exogym::runtime::comm
