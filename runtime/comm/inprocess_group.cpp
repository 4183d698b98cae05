#include "exogym/runtime/comm/inprocess_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>

#include "exogym/runtime/comm/group_work.h"
#include "exogym/runtime/comm/reduction.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/stacked.h"

namespace exogym::runtime::comm {

// Reduction work is cut into chunks of this many elements, so that the crew
// shares an all-reduce without paying per-call overhead on tiny slices.
static constexpr int64_t kChunkElements = 65536;
// Below this many elements read (tensor elements × nodes) a collective's work
// is done by the last node alone: waking a helper would cost more.
static constexpr int64_t kCrewElements = int64_t{1} << 20;

static int checked_size(int size) {
  EXOGYM_CHECK_INTERNAL(size >= 1, "InProcessGroup: size must be >= 1");
  return size;
}

InProcessGroup::InProcessGroup(int size, threads::AbortSignal& abort, int helpers, sim::ClockExchange* clocks)
    : size_(checked_size(size)),
      abort_(abort),
      crew_(helpers),
      meeting_(size_, 0, abort, [this](const MeetingPoint::Calls& calls) { execute(calls); }),
      groups_(0, size_, abort),
      clocks_(clocks) {
  for (int r = 0; r < size_; ++r) members_.push_back(r);
}

void InProcessGroup::set_members(std::vector<int> members) {
  meeting_.set_expected(members);
  members_ = std::move(members);
}

std::unique_ptr<sdk::Communicator> InProcessGroup::communicator(int rank, threads::NodeSlot* slot) {
  EXOGYM_CHECK_INTERNAL(!(rank < 0 || rank >= size_), "InProcessGroup: bad rank");
  return make_communicator(*this, rank, slot);
}

sdk::SharedTensors InProcessGroup::run(int rank, CollectiveCall call, threads::NodeSlot* slot) {
  if (!call.members.empty()) {
    const std::vector<int> members = call.members;
    groups_.meet(rank, std::move(call), members, slot, [&](const std::vector<CollectiveCall*>& calls, uint64_t) {
      share_group_arrival(clocks_, members, -std::numeric_limits<double>::infinity());
      std::vector<const std::vector<at::Tensor>*> parts;
      for (const CollectiveCall* c : calls) parts.push_back(&c->tensors);
      complete_group(calls, parts);
    });
    return nullptr;
  }
  const bool shared = call.shared_result;
  if (members_.size() == 1) {
    // Nothing to exchange: all_gather and all_reduce_shared still return
    // fresh tensors.
    if (call.kind == CallKind::Broadcast && call.root != rank) {
      throw sdk::Error("broadcast: root " + std::to_string(call.root) + " is down");
    }
    if (call.kind == CallKind::AllGather) {
      call.gathered->assign(1, {});
      for (const auto& t : call.tensors) call.gathered->front().push_back(t.clone());
    }
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    if (!shared) return nullptr;
    auto result = std::make_shared<std::vector<at::Tensor>>();
    for (const auto& t : call.tensors) result->push_back(t.clone());
    return result;
  }
  // A group that waits for this node never completes (group_meetings.h).
  groups_.enter_elsewhere(rank, "waits in " + describe_call(call));
  struct Leave {
    GroupMeetings& groups;
    int rank;
    ~Leave() { groups.leave(rank); }
  } leave{groups_, rank};
  meeting_.meet(rank, std::move(call), slot);
  return shared ? shared_result_ : nullptr;
}

namespace {

// Whether every member's tensor `tensor` is a contiguous fp32 CPU tensor
// summed or averaged: then reduce_chunk works on raw memory.
bool plain_float_sum(const MeetingPoint::Calls& calls, const std::vector<int>& members, size_t tensor) {
  const sdk::ReduceOp op = calls[members[0]].op;
  if (op != sdk::ReduceOp::Sum && op != sdk::ReduceOp::Avg) return false;
  for (int r : members) {
    const at::Tensor& t = calls[r].tensors[tensor];
    if (!t.device().is_cpu() || t.scalar_type() != at::kFloat || !t.is_contiguous()) return false;
  }
  return true;
}

}  // namespace

void InProcessGroup::reduce_chunk(const MeetingPoint::Calls& calls, size_t tensor, int64_t start, int64_t end,
                                  const at::Tensor& out) const {
  auto slice = [&](const at::Tensor& t) { return t.view(-1).slice(0, start, end); };
  auto member = [&](size_t i) -> const at::Tensor& { return calls[members_[i]].tensors[tensor]; };
  // Rank order, element by element: the same bits whoever does the work.
  // In place, the sum builds up in the first member's slice, which nobody
  // else touches.
  const size_t count = members_.size();
  const bool in_place = !out.defined();
  at::Tensor acc = slice(in_place ? member(0) : out);
  const sdk::ReduceOp op = calls[members_[0]].op;
  if (plain_float_sum(calls, members_, tensor)) {
    // The same additions as add_ (x + 1 * y is exact in one rounding), on
    // raw memory: with thousands of nodes, the views and calls of the
    // general path cost more than the arithmetic.
    auto data = [&](const at::Tensor& t) { return t.data_ptr<float>() + start; };
    float* sum = data(in_place ? member(0) : out);
    const int64_t n = end - start;
    if (!in_place) {
      // out = x0 + x1 gives the bits of x0 += x1 (a collective that does
      // work has two members or more).
      const float* x0 = data(member(0));
      const float* x1 = data(member(1));
      for (int64_t j = 0; j < n; ++j) sum[j] = x0[j] + x1[j];
    }
    for (size_t i = in_place ? 1 : 2; i < count; ++i) {
      const float* x = data(member(i));
      for (int64_t j = 0; j < n; ++j) sum[j] += x[j];
    }
    if (op == sdk::ReduceOp::Avg) average_sum(acc, static_cast<int64_t>(count));
    if (in_place) {
      for (size_t i = 1; i < count; ++i) std::memcpy(data(member(i)), sum, static_cast<size_t>(n) * sizeof(float));
    }
    return;
  }
  if (!in_place) acc.copy_(slice(member(0)));
  for (size_t i = 1; i < count; ++i) combine(acc, slice(member(i)), op);
  if (op == sdk::ReduceOp::Avg) average_sum(acc, static_cast<int64_t>(count));
  if (!in_place) return;
  // The whole tensors of the nodes of a stack (stacked execution's
  // gradients, sdk/stacked.h) are the rows of one: one copy fills the
  // others' (on a GPU one kernel where there were K - 1).
  std::vector<at::Tensor> rows;
  if (start == 0 && end == member(0).numel()) {
    for (size_t i = 0; i < count; ++i) rows.push_back(member(i));
  }
  const at::Tensor stack = sdk::stack_of_rows(rows);
  if (stack.defined()) {
    at::Tensor others = stack.narrow(0, 1, static_cast<int64_t>(count) - 1);
    others.copy_(member(0).unsqueeze(0).expand_as(others));
    return;
  }
  for (size_t i = 1; i < count; ++i) slice(member(i)).copy_(acc);
}

void InProcessGroup::execute(const MeetingPoint::Calls& calls) {
  groups_.leave_all(members_);  // everybody is here: nobody waits for anyone
  const CollectiveCall& first = calls[members_[0]];
  const int64_t count_members = static_cast<int64_t>(members_.size());
  int64_t elements = 0;
  for (const auto& t : first.tensors) elements += t.numel();
  // A GPU's tensors: one kernel per tensor and member, launched by this
  // thread (slices would launch thousands of tiny kernels for one model,
  // and the crew's threads would queue them on streams of their own).
  const bool on_device = !first.tensors.empty() && !first.tensors[0].device().is_cpu();
  // Small collectives are done by this thread alone.
  auto run_items = [&](int64_t count, const std::function<void(int64_t)>& item) {
    if (on_device || elements * count_members < kCrewElements) {
      for (int64_t i = 0; i < count; ++i) item(i);
    } else {
      crew_.run(count, item);
    }
  };
  shared_result_ = nullptr;  // every node took the last one
  switch (first.kind) {
    case CallKind::AllReduce: {
      // all_reduce_shared: one result for all, in fresh tensors.
      std::vector<at::Tensor> out(first.tensors.size());
      if (first.shared_result) {
        for (size_t i = 0; i < out.size(); ++i) out[i] = at::empty_like(first.tensors[i], at::MemoryFormat::Contiguous);
      }
      struct Chunk {
        size_t tensor;
        int64_t start, end;
      };
      std::vector<Chunk> chunks;
      for (size_t i = 0; i < first.tensors.size(); ++i) {
        const int64_t n = first.tensors[i].numel();
        // Element by element either way: the same bits in one chunk as in many.
        const int64_t step = on_device ? std::max<int64_t>(n, 1) : kChunkElements;
        for (int64_t start = 0; start < n; start += step) chunks.push_back({i, start, std::min(n, start + step)});
      }
      run_items(static_cast<int64_t>(chunks.size()), [&](int64_t index) {
        const Chunk& c = chunks[static_cast<size_t>(index)];
        reduce_chunk(calls, c.tensor, c.start, c.end, out[c.tensor]);
      });
      if (first.shared_result) shared_result_ = std::make_shared<const std::vector<at::Tensor>>(std::move(out));
      break;
    }
    case CallKind::Broadcast: {
      const int root = first.root;
      if (!std::binary_search(members_.begin(), members_.end(), root)) {
        throw sdk::Error("broadcast: root " + std::to_string(root) + " is down");
      }
      const int64_t count = static_cast<int64_t>(first.tensors.size());
      run_items(count * count_members, [&](int64_t index) {
        const int r = members_[static_cast<size_t>(index / count)];
        const size_t i = static_cast<size_t>(index % count);
        if (r != root) calls[r].tensors[i].copy_(calls[root].tensors[i]);
      });
      break;
    }
    case CallKind::AllGather:
      // Every node gets its own copies: strategies may write into them.
      run_items(count_members, [&](int64_t d) {
        auto& gathered = *calls[members_[static_cast<size_t>(d)]].gathered;
        gathered.assign(members_.size(), {});
        for (size_t j = 0; j < members_.size(); ++j) {
          for (const auto& t : calls[members_[j]].tensors) gathered[j].push_back(t.clone());
        }
      });
      break;
    case CallKind::Barrier:
      break;
  }
}

}  // namespace exogym::runtime::comm
