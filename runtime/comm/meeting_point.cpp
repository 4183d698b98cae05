#include "exogym/runtime/comm/meeting_point.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "exogym/runtime/threads/compute_slots.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

MeetingPoint::MeetingPoint(int members, int first_rank, threads::AbortSignal& abort, Work work)
    : first_rank_(first_rank), abort_(abort), work_(std::move(work)) {
  EXOGYM_CHECK_INTERNAL(members >= 1, "MeetingPoint: needs at least one member");
  for (int index = 0; index < members; ++index) expected_.push_back(index);
  is_expected_.assign(members, 1);
  calls_.resize(members);
  parked_.assign(members, nullptr);
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  });
}

void MeetingPoint::meet(int index, CollectiveCall call, threads::NodeSlot* slot) {
  // A node that computes gives its slot back while it waits (the nodes it
  // waits for need it).
  threads::NodeSlot* parked = slot && slot->held() ? slot : nullptr;
  if (parked) parked->park();
  uint64_t generation = 0;
  if (arrive(index, std::move(call), parked, generation)) {
    work_and_wake(index, parked);
  } else {
    wait(generation, parked);
  }
}

void MeetingPoint::set_expected(std::vector<int> members) {
  std::lock_guard<std::mutex> lock(mutex_);
  EXOGYM_CHECK_INTERNAL(arrived_ == 0, "MeetingPoint: membership changed during a collective");
  std::fill(is_expected_.begin(), is_expected_.end(), 0);
  for (int index : members) {
    EXOGYM_CHECK_INTERNAL(index >= 0 && index < static_cast<int>(calls_.size()), "MeetingPoint: bad member");
    is_expected_[index] = 1;
  }
  expected_ = std::move(members);
}

bool MeetingPoint::arrive(int index, CollectiveCall call, threads::NodeSlot* parked, uint64_t& generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
  EXOGYM_CHECK_INTERNAL(is_expected_[index],
                        "node " + std::to_string(first_rank_ + index) + " called a collective while it is down");
  calls_[index] = std::move(call);
  parked_[index] = parked;
  generation = generation_;
  if (++arrived_ < static_cast<int>(expected_.size())) return false;
  arrived_ = 0;
  working_ = true;
  return true;
}

void MeetingPoint::wait(uint64_t generation, threads::NodeSlot* parked) {
  if (parked) {
    try {
      parked->wait_granted();  // the last node grants it once the work is done
    } catch (const sdk::AbortedError&) {
      leave_aborted();
    }
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return generation_ != generation || abort_.aborted(); });
  if (generation_ != generation) return;
  lock.unlock();
  leave_aborted();
}

void MeetingPoint::leave_aborted() {
  {
    // No work starts after the abort (arrive() checks it first), and no
    // later collective's either (this node has not arrived at it).
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !working_; });
  }
  throw sdk::AbortedError("run aborted: " + abort_.reason());
}

void MeetingPoint::check_matching() const {
  const int reference = expected_.front();
  for (size_t i = 1; i < expected_.size(); ++i) {
    const int member = expected_[i];
    check_same_collective(calls_[member], first_rank_ + member, calls_[reference], first_rank_ + reference);
  }
}

void MeetingPoint::work_and_wake(int index, threads::NodeSlot* parked) {
  // However this ends, the nodes that an abort woke may leave after it:
  // the work writes into their calls, and the grant below points into their
  // compute slots, which they destroy when they leave.
  struct WorkOver {
    MeetingPoint& r;
    ~WorkOver() {
      {
        std::lock_guard<std::mutex> lock(r.mutex_);
        r.working_ = false;
      }
      r.cv_.notify_all();
    }
  } work_over{*this};
  // Every member has arrived and waits: this thread does the work.
  try {
    check_matching();
    work_(calls_);
  } catch (const sdk::AbortedError&) {
    throw;
  } catch (const std::exception& e) {
    // The others wait for this thread: stop them before reporting.
    abort_.trigger(e.what());
    throw sdk::Error(e.what());
  }
  std::vector<threads::ComputeSlots::Waiter*> waiting;
  threads::ComputeSlots* slots = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int member : expected_) {
      if (member != index && parked_[member]) {
        waiting.push_back(&parked_[member]->waiter());
        slots = parked_[member]->slots();
      }
      parked_[member] = nullptr;
      calls_[member] = CollectiveCall();  // let go of every node's tensors
    }
    ++generation_;
  }
  cv_.notify_all();  // the nodes without a slot
  // This thread is running already: it takes a slot first, then the others
  // get the free ones in rank order and queue for the rest.
  if (parked) parked->acquire();
  if (slots) slots->grant(waiting);
}

}  // namespace exogym::runtime::comm
