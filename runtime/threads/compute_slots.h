#pragma once
// At most `parallelism` nodes compute at once. A node holds a slot while it
// computes and gives it back while it waits in a collective, so that K node
// threads share P cores without oversubscribing them (OpenMP teams spinning
// against each other on 2 cores are many times slower: thread_plan.h).
//
// Waking a thread on another core costs tens of microseconds on a virtual
// machine (measured: a 107 µs condition-variable round trip across the two
// cores of the development VM, 7 µs on one core), so slots are handed over
// directly: a released slot goes to the longest waiter, whose own condition
// variable wakes it and nobody else; and a node waiting in a collective is
// woken only when the collective is over *and* a slot is its (park/grant).
#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "exogym/runtime/threads/abort_signal.h"

namespace exogym::runtime::threads {

class ComputeSlots {
 public:
  // One thread's place in line. Its fields are guarded by the slots' mutex.
  struct Waiter {
    std::condition_variable cv;
    bool granted = false;
    int slot = -1;                      // which slot it holds
    pthread_t thread = pthread_self();  // the thread that waits
    int pinned_to = -1;                 // the slot whose CPUs it runs on
  };

  ComputeSlots(int slots, AbortSignal& abort);
  int capacity() const { return capacity_; }

  // Waiters are registered for their lifetime, so an abort can wake them.
  void enroll(Waiter& w);
  void withdraw(Waiter& w);

  // Blocks until a slot is `w`'s (first come, first served); throws
  // sdk::AbortedError if the run aborts.
  void acquire(Waiter& w);
  // Gives w's slot back: straight to the longest waiter, if any.
  void release(Waiter& w);
  // Gives w's slot back and parks `w`: it will not get a slot until grant()
  // queues it, and wait_granted() then returns once it holds one.
  void release_and_park(Waiter& w);
  // Queues parked waiters, in this order, and hands free slots to the first.
  void grant(const std::vector<Waiter*>& waiters);
  // Blocks until `w` holds a slot again; throws sdk::AbortedError on abort.
  void wait_granted(Waiter& w);

  // Each slot's CPUs, when slots are pinned (see pin_threads).
  bool pinned() const { return !cpus_.empty(); }
  const std::vector<int>& cpus_of(int slot) const { return cpus_[slot]; }
  // Gives each slot its own share of this process's CPUs, so that the nodes
  // computing at once never share a core (the kernel, waking a node from
  // another, likes to put it on the waker's core). Only when there are at
  // least as many CPUs as slots.
  void pin_threads();

 private:
  void hand_over_locked();
  void give_back_locked(Waiter& w);
  // Takes a free slot for `w` and, with pinned slots, moves w's thread to
  // the slot's CPUs before it wakes, so the kernel wakes it there.
  void take_free_locked(Waiter& w);

  const int capacity_;
  int free_;
  std::vector<int> free_ids_;
  std::vector<std::vector<int>> cpus_;
  AbortSignal& abort_;
  std::mutex mutex_;
  std::deque<Waiter*> queue_;
  std::vector<Waiter*> enrolled_;
};

// One node's claim on a slot. The node releases it while it waits in a
// collective and re-acquires it afterwards; if a wait throws (abort), the slot
// is simply not held and the destructor has nothing to give back.
class NodeSlot {
 public:
  explicit NodeSlot(ComputeSlots* slots) : slots_(slots) {
    if (slots_) slots_->enroll(waiter_);
  }
  ~NodeSlot() {
    if (!slots_) return;
    if (held_) slots_->release(waiter_);
    slots_->withdraw(waiter_);
  }
  NodeSlot(const NodeSlot&) = delete;
  NodeSlot& operator=(const NodeSlot&) = delete;

  void acquire() {
    if (slots_ && !held_) {
      slots_->acquire(waiter_);
      held_ = true;
    }
  }
  void release() {
    if (slots_ && held_) {
      held_ = false;
      slots_->release(waiter_);
    }
  }
  bool held() const { return held_; }

  // For a collective backend (see ComputeSlots): give the slot back and wait
  // for a grant instead of queueing at once.
  ComputeSlots* slots() const { return slots_; }
  ComputeSlots::Waiter& waiter() { return waiter_; }
  void park() {
    held_ = false;
    slots_->release_and_park(waiter_);  // parks even if it held no slot
  }
  // After park(): blocks until the slot is the node's again.
  void wait_granted() {
    slots_->wait_granted(waiter_);
    held_ = true;
  }

 private:
  ComputeSlots* slots_;
  ComputeSlots::Waiter waiter_;
  bool held_ = false;
};

}  // namespace exogym::runtime::threads
