#include "exogym/runtime/comm/inprocess_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <utility>

#include "exogym/runtime/comm/reduction.h"
#include "exogym/sdk/error.h"

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

InProcessGroup::InProcessGroup(int size, cluster::AbortSignal& abort, int helpers)
    : size_(checked_size(size)),
      abort_(abort),
      crew_(helpers),
      rendezvous_(size_, 0, abort, [this](const Rendezvous::Calls& calls) { execute(calls); }) {}

std::unique_ptr<sdk::Communicator> InProcessGroup::communicator(int rank, cluster::NodeSlot* slot) {
  EXOGYM_CHECK_INTERNAL(!(rank < 0 || rank >= size_), "InProcessGroup: bad rank");
  return make_communicator(*this, rank, slot);
}

void InProcessGroup::run(int rank, CollectiveCall call, cluster::NodeSlot* slot) {
  if (size_ == 1) {
    // Nothing to exchange: all_gather still returns fresh tensors.
    if (call.kind == CollectiveKind::AllGather) {
      call.gathered->assign(1, {});
      for (const auto& t : call.tensors) call.gathered->front().push_back(t.clone());
    }
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    return;
  }
  rendezvous_.meet(rank, std::move(call), slot);
}

void InProcessGroup::reduce_chunk(const Rendezvous::Calls& calls, size_t tensor, int64_t start) const {
  const int64_t end = std::min(calls[0].tensors[tensor].numel(), start + kChunkElements);
  auto slice = [&](int r) { return calls[r].tensors[tensor].view(-1).slice(0, start, end); };
  // Rank order, element by element: the same bits whoever does the work.
  // The sum builds up in node 0's slice, which nobody else touches.
  at::Tensor acc = slice(0);
  const sdk::ReduceOp op = calls[0].op;
  for (int r = 1; r < size_; ++r) combine(acc, slice(r), op);
  if (op == sdk::ReduceOp::Avg) average_sum(acc, size_);
  for (int r = 1; r < size_; ++r) slice(r).copy_(acc);
}

void InProcessGroup::execute(const Rendezvous::Calls& calls) {
  const CollectiveCall& first = calls[0];
  int64_t elements = 0;
  for (const auto& t : first.tensors) elements += t.numel();
  // Small collectives are done by this thread alone.
  auto run_items = [&](int64_t count, const std::function<void(int64_t)>& item) {
    if (elements * size_ < kCrewElements) {
      for (int64_t i = 0; i < count; ++i) item(i);
    } else {
      crew_.run(count, item);
    }
  };
  switch (first.kind) {
    case CollectiveKind::AllReduce: {
      std::vector<std::pair<size_t, int64_t>> chunks;  // (tensor, first element)
      for (size_t i = 0; i < first.tensors.size(); ++i) {
        for (int64_t start = 0; start < first.tensors[i].numel(); start += kChunkElements)
          chunks.emplace_back(i, start);
      }
      run_items(static_cast<int64_t>(chunks.size()),
                [&](int64_t index) { reduce_chunk(calls, chunks[index].first, chunks[index].second); });
      break;
    }
    case CollectiveKind::Broadcast: {
      const int root = first.root;
      const int64_t count = static_cast<int64_t>(first.tensors.size());
      run_items(count * size_, [&](int64_t index) {
        const int r = static_cast<int>(index / count);
        const size_t i = static_cast<size_t>(index % count);
        if (r != root) calls[r].tensors[i].copy_(calls[root].tensors[i]);
      });
      break;
    }
    case CollectiveKind::AllGather:
      // Every node gets its own copies: strategies may write into them.
      run_items(size_, [&](int64_t d) {
        auto& gathered = *calls[d].gathered;
        gathered.assign(size_, {});
        for (int r = 0; r < size_; ++r) {
          for (const auto& t : calls[r].tensors) gathered[r].push_back(t.clone());
        }
      });
      break;
    case CollectiveKind::Barrier:
      break;
  }
}

}  // namespace exogym::runtime::comm
