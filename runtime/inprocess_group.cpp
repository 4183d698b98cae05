#include "exogym/runtime/inprocess_group.h"

#include <ATen/ATen.h>

#include <sstream>

#include "exogym/runtime/collective_args.h"
#include "exogym/runtime/compute_slots.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime {

using sdk::ReduceOp;

// Reduction work is cut into chunks of at least this many elements and dealt
// out round-robin to the nodes, so K threads share an all-reduce without
// paying per-call overhead on tiny slices.
static constexpr int64_t kMinChunkElements = 16384;

class InProcessCommunicator final : public sdk::Communicator {
 public:
  InProcessCommunicator(InProcessGroup& group, int rank, NodeSlot* slot) : group_(group), rank_(rank), slot_(slot) {}
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
  NodeSlot* slot_;
};

InProcessGroup::InProcessGroup(int size, AbortSignal& abort) : size_(size), abort_(abort), posted_(size) {
  if (size < 1) throw std::invalid_argument("InProcessGroup: size must be >= 1");
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  });
}

InProcessGroup::~InProcessGroup() = default;

std::unique_ptr<sdk::Communicator> InProcessGroup::communicator(int rank, NodeSlot* slot) {
  if (rank < 0 || rank >= size_) throw std::out_of_range("InProcessGroup: bad rank");
  return std::make_unique<InProcessCommunicator>(*this, rank, slot);
}

void InProcessGroup::arrive_and_wait(NodeSlot* slot) {
  // Give the compute slot back while waiting: the nodes we wait for need it.
  const bool had_slot = slot && slot->held();
  if (had_slot) slot->release();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation || abort_.aborted(); });
      if (generation_ == generation) throw sdk::AbortedError("run aborted: " + abort_.reason());
    }
  }
  if (had_slot) slot->acquire();
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

void InProcessGroup::reduce_share(int rank) {
  const Posted& first = posted_[0];
  const size_t count = first.tensors.size();
  int64_t chunk_index = 0;
  for (size_t i = 0; i < count; ++i) {
    const int64_t numel = first.tensors[i].numel();
    if (numel == 0) continue;
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(size_, numel / kMinChunkElements));
    const int64_t per_chunk = (numel + chunks - 1) / chunks;
    for (int64_t c = 0; c < chunks; ++c, ++chunk_index) {
      if (chunk_index % size_ != rank) continue;
      const int64_t lo = c * per_chunk;
      const int64_t hi = std::min(numel, lo + per_chunk);
      if (lo >= hi) continue;
      auto slice = [&](int r) { return posted_[r].tensors[i].view(-1).slice(0, lo, hi); };
      // Rank order, element by element: the same bits whoever does the work.
      at::Tensor acc = slice(0).clone();
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
      for (int r = 0; r < size_; ++r) slice(r).copy_(acc);
    }
  }
}

void InProcessGroup::run(int rank, Posted posted, NodeSlot* slot) {
  if (size_ == 1) {
    // Nothing to exchange: all_gather still returns fresh tensors.
    if (posted.kind == Kind::AllGather) {
      posted.gathered->assign(1, {});
      for (const auto& t : posted.tensors) posted.gathered->front().push_back(t.clone());
    }
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    return;
  }
  posted_[rank] = posted;
  arrive_and_wait(slot);  // everyone has posted
  try {
    check_matching(rank);
    switch (posted.kind) {
      case Kind::AllReduce:
        reduce_share(rank);
        break;
      case Kind::Broadcast:
        if (rank != posted.root) {
          for (size_t i = 0; i < posted.tensors.size(); ++i) posted.tensors[i].copy_(posted_[posted.root].tensors[i]);
        }
        break;
      case Kind::AllGather:
        posted.gathered->assign(size_, {});
        for (int r = 0; r < size_; ++r) {
          for (const auto& t : posted_[r].tensors) (*posted.gathered)[r].push_back(t.clone());
        }
        break;
      case Kind::Barrier:
        break;
    }
  } catch (const sdk::AbortedError&) {
    throw;
  } catch (const std::exception& e) {
    fail(e.what());
  }
  arrive_and_wait(slot);     // nobody moves on while others still read its tensors
  posted_[rank] = Posted();  // let go of this node's tensors
}

}  // namespace exogym::runtime
