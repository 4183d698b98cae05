#include "exogym/runtime/comm/inprocess_group.h"

#include <ATen/ATen.h>

#include <functional>
#include <sstream>

#include "exogym/runtime/comm/collective_args.h"
#include "exogym/runtime/cluster/compute_slots.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

using sdk::ReduceOp;

// Reduction work is cut into chunks of this many elements, so that the crew
// shares an all-reduce without paying per-call overhead on tiny slices.
static constexpr int64_t kChunkElements = 65536;
// Below this many elements read (tensor elements × nodes) a collective's work
// is done by the last node alone: waking a helper would cost more.
static constexpr int64_t kCrewElements = int64_t{1} << 20;

class InProcessCommunicator final : public sdk::Communicator {
 public:
  InProcessCommunicator(InProcessGroup& group, int rank, cluster::NodeSlot* slot) : group_(group), rank_(rank), slot_(slot) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }

  void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op) override {
    run_in_place(InProcessGroup::Kind::AllReduce, tensors, op, 0);
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    check_root(root, size());
    run_in_place(InProcessGroup::Kind::Broadcast, tensors, ReduceOp::Sum, root);
  }
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override {
    std::vector<std::vector<at::Tensor>> gathered;
    InProcessGroup::Posted posted;
    posted.kind = InProcessGroup::Kind::AllGather;
    posted.tensors = contiguous_payload(tensors);
    posted.gathered = &gathered;
    group_.run(rank_, posted, slot_);
    return gathered;
  }
  void barrier() override {
    InProcessGroup::Posted posted;
    posted.kind = InProcessGroup::Kind::Barrier;
    group_.run(rank_, posted, slot_);
  }

 private:
  void run_in_place(InProcessGroup::Kind kind, std::vector<at::Tensor>& tensors, ReduceOp op, int root) {
    std::vector<at::Tensor> work = contiguous_payload(tensors);
    InProcessGroup::Posted posted;
    posted.kind = kind;
    posted.op = op;
    posted.root = root;
    posted.tensors = work;
    group_.run(rank_, posted, slot_);
    copy_back(tensors, work);
  }

  InProcessGroup& group_;
  int rank_;
  cluster::NodeSlot* slot_;
};

InProcessGroup::InProcessGroup(int size, cluster::AbortSignal& abort, int helpers)
    : size_(size), abort_(abort), posted_(size), parked_(size, nullptr), crew_(helpers) {
  if (size < 1) throw std::invalid_argument("InProcessGroup: size must be >= 1");
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  });
}

InProcessGroup::~InProcessGroup() = default;

std::unique_ptr<sdk::Communicator> InProcessGroup::communicator(int rank, cluster::NodeSlot* slot) {
  if (rank < 0 || rank >= size_) throw std::out_of_range("InProcessGroup: bad rank");
  return std::make_unique<InProcessCommunicator>(*this, rank, slot);
}

void InProcessGroup::fail(const std::string& message) {
  abort_.trigger(message);
  throw sdk::Error(message);
}

static const char* kind_name(int kind) {
  static const char* names[] = {"all_reduce", "broadcast", "all_gather", "barrier"};
  return names[kind];
}

void InProcessGroup::check_matching(int rank) const {
  // SPMD contract: every node calls the same collective with the same shapes.
  // A mismatch is a strategy bug; say exactly where.
  const Posted& mine = posted_[rank];
  const Posted& first = posted_[0];
  auto where = [&] {
    return std::string("collective mismatch: node ") + std::to_string(rank) + " called " +
           kind_name(static_cast<int>(mine.kind)) + " while node 0 called " + kind_name(static_cast<int>(first.kind));
  };
  if (mine.kind != first.kind) throw sdk::Error(where());
  if (mine.kind == Kind::Barrier || mine.kind == Kind::AllGather) {
    if (mine.kind == Kind::AllGather && mine.tensors.size() != first.tensors.size()) {
      throw sdk::Error(where() + " with a different number of tensors");
    }
    return;
  }
  if (mine.op != first.op || mine.root != first.root) throw sdk::Error(where() + " with a different op or root");
  if (mine.tensors.size() != first.tensors.size()) {
    throw sdk::Error(where() + " with " + std::to_string(mine.tensors.size()) + " tensors instead of " +
                     std::to_string(first.tensors.size()));
  }
  for (size_t i = 0; i < mine.tensors.size(); ++i) {
    const auto& a = mine.tensors[i];
    const auto& b = first.tensors[i];
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
      std::ostringstream s;
      s << where() << ": tensor " << i << " is " << a.sizes() << " " << a.scalar_type() << " on node " << rank
        << " but " << b.sizes() << " " << b.scalar_type() << " on node 0";
      throw sdk::Error(s.str());
    }
  }
}

void InProcessGroup::reduce(const std::vector<int64_t>& chunk_tensor, const std::vector<int64_t>& chunk_start,
                            int64_t index) {
  const Posted& first = posted_[0];
  const size_t i = static_cast<size_t>(chunk_tensor[index]);
  const int64_t lo = chunk_start[index];
  const int64_t hi = std::min(first.tensors[i].numel(), lo + kChunkElements);
  auto slice = [&](int r) { return posted_[r].tensors[i].view(-1).slice(0, lo, hi); };
  // Rank order, element by element: the same bits whoever does the work.
  // The sum builds up in node 0's slice, which nobody else touches.
  at::Tensor acc = slice(0);
  for (int r = 1; r < size_; ++r) {
    switch (first.op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc.add_(slice(r));
        break;
      case ReduceOp::Min:
        at::minimum_out(acc, acc, slice(r));
        break;
      case ReduceOp::Max:
        at::maximum_out(acc, acc, slice(r));
        break;
    }
  }
  if (first.op == ReduceOp::Avg) {
    if (at::isIntegralType(acc.scalar_type(), /*includeBool=*/true)) {
      acc.div_(size_, "trunc");
    } else {
      acc.div_(size_);
    }
  }
  for (int r = 1; r < size_; ++r) slice(r).copy_(acc);
}

void InProcessGroup::execute() {
  const Posted& first = posted_[0];
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
    case Kind::AllReduce: {
      std::vector<int64_t> chunk_tensor, chunk_start;
      for (size_t i = 0; i < first.tensors.size(); ++i) {
        for (int64_t lo = 0; lo < first.tensors[i].numel(); lo += kChunkElements) {
          chunk_tensor.push_back(static_cast<int64_t>(i));
          chunk_start.push_back(lo);
        }
      }
      run_items(static_cast<int64_t>(chunk_tensor.size()),
                [&](int64_t index) { reduce(chunk_tensor, chunk_start, index); });
      break;
    }
    case Kind::Broadcast: {
      const int root = first.root;
      const int64_t count = static_cast<int64_t>(first.tensors.size());
      run_items(count * size_, [&](int64_t index) {
        const int r = static_cast<int>(index / count);
        const size_t i = static_cast<size_t>(index % count);
        if (r != root) posted_[r].tensors[i].copy_(posted_[root].tensors[i]);
      });
      break;
    }
    case Kind::AllGather:
      // Every node gets its own copies: strategies may write into them.
      run_items(size_, [&](int64_t d) {
        auto& gathered = *posted_[d].gathered;
        gathered.assign(size_, {});
        for (int r = 0; r < size_; ++r) {
          for (const auto& t : posted_[r].tensors) gathered[r].push_back(t.clone());
        }
      });
      break;
    case Kind::Barrier:
      break;
  }
}

void InProcessGroup::run(int rank, Posted posted, cluster::NodeSlot* slot) {
  if (size_ == 1) {
    // Nothing to exchange: all_gather still returns fresh tensors.
    if (posted.kind == Kind::AllGather) {
      posted.gathered->assign(1, {});
      for (const auto& t : posted.tensors) posted.gathered->front().push_back(t.clone());
    }
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    return;
  }
  // A node that computes gives its slot back while it waits (the nodes it
  // waits for need it), and sleeps until the collective is over and a slot
  // is its again.
  const bool parked = slot && slot->held();
  if (parked) slot->park();
  bool last = false;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    posted_[rank] = std::move(posted);
    parked_[rank] = parked ? slot : nullptr;
    generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      last = true;
    }
  }
  if (!last) {
    if (parked) {
      slot->wait_granted();
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return generation_ != generation || abort_.aborted(); });
      if (generation_ == generation) throw sdk::AbortedError("run aborted: " + abort_.reason());
    }
    return;  // the last node did the work
  }

  // Every node has posted and waits: this thread does the work.
  try {
    for (int r = 0; r < size_; ++r) check_matching(r);
    execute();
  } catch (const sdk::AbortedError&) {
    throw;
  } catch (const std::exception& e) {
    fail(e.what());
  }
  std::vector<cluster::ComputeSlots::Waiter*> waiting;
  cluster::ComputeSlots* slots = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int r = 0; r < size_; ++r) {
      if (r != rank && parked_[r]) {
        waiting.push_back(&parked_[r]->waiter());
        slots = parked_[r]->slots();
      }
      parked_[r] = nullptr;
      posted_[r] = Posted();  // let go of every node's tensors
    }
    ++generation_;
  }
  cv_.notify_all();  // the nodes without a slot
  // This thread is running already: it takes a slot first, then the others
  // get the free ones in rank order and queue for the rest.
  if (parked) slot->acquire();
  if (slots) slots->grant(waiting);
}

}  // namespace exogym::runtime::comm
