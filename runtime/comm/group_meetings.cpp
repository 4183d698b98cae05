#include "exogym/runtime/comm/group_meetings.h"

#include <algorithm>
#include <exception>
#include <set>
#include <utility>

#include "exogym/runtime/comm/cross_process_waits.h"
#include "exogym/runtime/threads/compute_slots.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

GroupMeetings::GroupMeetings(int first_rank, int count, threads::AbortSignal& abort)
    : first_rank_(first_rank), abort_(abort), nodes_(static_cast<size_t>(count)) {
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  });
}

void GroupMeetings::meet(int rank, CollectiveCall call, const std::vector<int>& local, threads::NodeSlot* slot,
                         const Work& work) {
  // The members it waits for need the compute slot more.
  const bool held = slot && slot->held();
  if (held) slot->release();
  std::unique_lock<std::mutex> lock(mutex_);
  if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
  auto it = meetings_.try_emplace(call.members).first;
  const std::vector<int>& key = it->first;
  Meeting& m = it->second;
  if (m.calls.empty()) {
    m.local = local;
    ++pending_;
  }
  Node& me = node(rank);
  me.group = &key;
  me.call = describe_call(call);
  me.meeting = m.count;
  m.calls.emplace(rank, std::move(call));
  if (m.calls.size() < m.local.size()) {
    set_state(me, State::Waiting);
    const std::string deadlock = find_deadlock(rank, key);
    if (!deadlock.empty()) fail(lock, deadlock, rank, &key);
    cv_.wait(lock, [&] { return me.state == State::Running || (abort_.aborted() && me.state == State::Waiting); });
    if (me.state == State::Waiting) {
      // Aborted before the work began: nobody will read its call.
      forget(rank, m);
      set_state(me, State::Running);
      throw sdk::AbortedError("run aborted: " + abort_.reason());
    }
  } else {
    run_work(lock, key, work);
  }
  lock.unlock();
  if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
  if (held) slot->acquire();
}

void GroupMeetings::run_work(std::unique_lock<std::mutex>& lock, std::vector<int> group, const Work& work) {
  Meeting& m = meetings_.at(group);
  std::vector<CollectiveCall> calls;
  for (auto& [rank, call] : m.calls) {
    calls.push_back(std::move(call));
    set_state(node(rank), State::Working);
  }
  const std::vector<int> local = m.local;
  m.calls.clear();
  --pending_;
  const uint64_t count = m.count++;
  lock.unlock();
  std::string error;
  try {
    for (size_t i = 1; i < calls.size(); ++i) check_same_collective(calls[i], local[i], calls[0], local[0]);
    std::vector<CollectiveCall*> pointers;
    for (auto& c : calls) pointers.push_back(&c);
    work(pointers, count);
  } catch (const sdk::AbortedError&) {
  } catch (const std::exception& e) {
    error = e.what();
  }
  calls.clear();  // let go of every member's tensors
  lock.lock();
  for (int rank : local) set_state(node(rank), State::Running);
  cv_.notify_all();
  if (!error.empty()) {
    lock.unlock();
    abort_.trigger(error);
    throw sdk::Error(error);
  }
}

void GroupMeetings::fail(std::unique_lock<std::mutex>& lock, const std::string& reason, int rank,
                         const std::vector<int>* group) {
  // The node leaves: its call goes, and the others wake with the abort.
  if (group) forget(rank, meetings_.at(*group));
  set_state(node(rank), State::Running);
  lock.unlock();
  abort_.trigger(reason);
  throw sdk::Error(reason);
}

void GroupMeetings::forget(int rank, Meeting& m) {
  if (m.calls.erase(rank) && m.calls.empty()) --pending_;
}

std::string GroupMeetings::find_deadlock(int rank, const std::vector<int>& group) {
  // Follow the members this group waits for: one waiting elsewhere, or in
  // a group that leads back here, never comes.
  std::set<const std::vector<int>*> visited;
  std::string chain;
  std::function<std::string(const std::vector<int>&, int)> visit = [&](const std::vector<int>& key,
                                                                       int waiter) -> std::string {
    visited.insert(&key);
    const Meeting& m = meetings_.at(key);
    const std::string what = describe_call(m.calls.begin()->second);
    for (int r : m.local) {
      if (m.calls.count(r)) continue;
      const Node& n = node(r);
      const std::string step =
          "node " + std::to_string(waiter) + " waits in " + what + " for node " + std::to_string(r);
      if (n.state == State::Elsewhere) return step + ", which " + n.elsewhere;
      if (n.state != State::Waiting) continue;
      if (n.group == &group)
        return step + ", which waits in " + describe_call(meetings_.at(group).calls.begin()->second);
      if (visited.count(n.group)) continue;
      const std::string rest = visit(*n.group, r);
      if (!rest.empty()) return step + ", while " + rest;
    }
    return "";
  };
  const std::string found = visit(group, rank);
  return found.empty() ? found : "deadlock: " + found + kDeadlockAdvice;
}

std::string GroupMeetings::find_waiters_for(int rank) {
  for (const auto& [key, m] : meetings_) {
    if (m.calls.empty() || m.calls.count(rank) || !std::binary_search(m.local.begin(), m.local.end(), rank)) continue;
    return "deadlock: node " + std::to_string(m.calls.begin()->first) + " waits in " +
           describe_call(m.calls.begin()->second) + " for node " + std::to_string(rank) + ", which " +
           node(rank).elsewhere + kDeadlockAdvice;
  }
  return "";
}

void GroupMeetings::enter_elsewhere(int rank, const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  Node& me = node(rank);
  set_state(me, State::Elsewhere);
  me.elsewhere = what;
  if (pending_ == 0) return;
  const std::string deadlock = find_waiters_for(rank);
  if (!deadlock.empty()) fail(lock, deadlock, rank, nullptr);
}

void GroupMeetings::leave_all(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int rank : ranks) {
    if (node(rank).state == State::Elsewhere) set_state(node(rank), State::Running);
  }
}

void GroupMeetings::leave(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  set_state(node(rank), State::Running);
}

std::string GroupMeetings::wait_report(const std::set<std::vector<int>>& interest) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::vector<int>, uint64_t>> begun;
  const int last_rank = first_rank_ + static_cast<int>(nodes_.size()) - 1;
  for (const auto& members : interest) {
    const bool here =
        std::any_of(members.begin(), members.end(), [&](int r) { return r >= first_rank_ && r <= last_rank; });
    if (!here) continue;
    auto it = meetings_.find(members);
    begun.emplace_back(members, it == meetings_.end() ? 0 : it->second.count);
  }
  std::vector<CrossProcessWaits::Wait> waits;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.state == State::Running) continue;
    CrossProcessWaits::Wait w;
    w.rank = first_rank_ + static_cast<int>(i);
    w.changes = n.changes;
    if (n.state == State::Elsewhere) {
      w.what = n.elsewhere;
    } else {
      w.in_group = true;
      w.members = *n.group;
      w.meeting = n.meeting;
      w.what = n.call;
    }
    waits.push_back(std::move(w));
  }
  return CrossProcessWaits::report(waits, begun);
}

}  // namespace exogym::runtime::comm
