// The rendezvous where a process's node threads meet for each collective
// (comm/meeting_point.h), on its own: arrivals, generations, matching, compute
// slots and aborts. Catch2 checks run on the main thread only: the node
// threads record what they saw.
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/comm/collective_call.h"
#include "exogym/runtime/comm/meeting_point.h"
#include "exogym/runtime/threads/abort_signal.h"
#include "exogym/runtime/threads/compute_slots.h"
#include "exogym/sdk/error.h"
#include "testing.h"

using exogym::runtime::comm::CallKind;
using exogym::runtime::comm::check_same_collective;
using exogym::runtime::comm::CollectiveCall;
using exogym::runtime::comm::MeetingPoint;
using exogym::runtime::threads::AbortSignal;
using exogym::runtime::threads::ComputeSlots;
using exogym::runtime::threads::NodeSlot;

namespace {

// How a member's thread ended.
struct Ending {
  bool aborted = false;  // sdk::AbortedError
  std::string error;     // any other error's message
};

// Runs body(index, slot) on `members` threads that share `capacity` compute
// slots; fails the test (instead of hanging it) after 30 s.
std::vector<Ending> run_members(int members, int capacity, AbortSignal& abort,
                                const std::function<void(int, NodeSlot&)>& body) {
  ComputeSlots slots(capacity, abort);
  std::vector<Ending> endings(members);
  auto all = std::async(std::launch::async, [&] {
    std::vector<std::thread> threads;
    for (int index = 0; index < members; ++index) {
      threads.emplace_back([&, index] {
        NodeSlot slot(&slots);
        try {
          body(index, slot);
        } catch (const exogym::sdk::AbortedError&) {
          endings[index].aborted = true;
        } catch (const std::exception& e) {
          endings[index].error = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  });
  if (all.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    abort.trigger("test timeout");
    all.wait();
    FAIL("the members did not finish within 30 s");
  }
  return endings;
}

CollectiveCall all_reduce_of(at::Tensor t) {
  CollectiveCall call;
  call.kind = CallKind::AllReduce;
  call.tensors = {std::move(t)};
  return call;
}

}  // namespace

TEST_CASE("the rendezvous runs the work once per collective, after every arrival, on a member's thread",
          "[collectives]") {
  const int N = 4, G = 50;
  AbortSignal abort;
  std::vector<std::atomic<int>> arrived(G);
  std::vector<std::vector<int>> posted(G);  // by generation: the values the work saw, by member
  std::vector<int> arrived_at_work(G, 0);
  std::vector<std::thread::id> worker(G);
  std::atomic<int> works{0};
  MeetingPoint rendezvous(N, 0, abort, [&](const MeetingPoint::Calls& calls) {
    const int g = works.load();
    arrived_at_work[g] = arrived[g].load();
    worker[g] = std::this_thread::get_id();
    for (const auto& call : calls) posted[g].push_back(static_cast<int>(call.tensors.at(0).item<int64_t>()));
    ++works;
  });
  std::vector<std::thread::id> members(N);
  std::vector<std::vector<int>> works_seen(N);  // by member: works done when each meet returned
  std::vector<int> held_after(N, 0);
  const auto endings = run_members(N, 2, abort, [&](int index, NodeSlot& slot) {
    members[index] = std::this_thread::get_id();
    slot.acquire();
    for (int g = 0; g < G; ++g) {
      ++arrived[g];
      rendezvous.meet(index, all_reduce_of(at::full({1}, 100 * g + index, at::kLong)), &slot);
      works_seen[index].push_back(works.load());
      held_after[index] += slot.held() ? 1 : 0;
    }
  });
  for (const auto& e : endings) {
    INFO(e.error);
    REQUIRE_FALSE(e.aborted);
    REQUIRE(e.error.empty());
  }
  REQUIRE(works.load() == G);
  const std::set<std::thread::id> member_threads(members.begin(), members.end());
  for (int g = 0; g < G; ++g) {
    INFO("collective " << g);
    REQUIRE(arrived_at_work[g] == N);
    REQUIRE(posted[g] == std::vector<int>{100 * g, 100 * g + 1, 100 * g + 2, 100 * g + 3});
    REQUIRE(member_threads.count(worker[g]) == 1);
  }
  for (int index = 0; index < N; ++index) {
    INFO("member " << index);
    // Each meet returned after its own collective's work and before the
    // next one's (which waits for this member), holding its slot again.
    for (int g = 0; g < G; ++g) REQUIRE(works_seen[index][g] == g + 1);
    REQUIRE(held_after[index] == G);
  }
}

TEST_CASE("a collective mismatch at the rendezvous names the nodes and the collectives, and stops every member",
          "[collectives]") {
  AbortSignal abort;
  bool worked = false;
  // Members 0-2 are nodes 4-6 (a process's block).
  MeetingPoint rendezvous(3, 4, abort, [&](const MeetingPoint::Calls&) { worked = true; });
  const auto endings = run_members(3, 3, abort, [&](int index, NodeSlot& slot) {
    slot.acquire();
    CollectiveCall call = all_reduce_of(at::ones({4}));
    if (index == 1) call.kind = CallKind::Broadcast;
    rendezvous.meet(index, std::move(call), &slot);
  });
  REQUIRE_FALSE(worked);
  int reported = 0, aborted = 0;
  for (const auto& e : endings) {
    if (!e.error.empty()) {
      ++reported;
      REQUIRE_THAT(e.error, Catch::Contains("collective mismatch: node 5 called broadcast while node 4 called "
                                            "all_reduce"));
    }
    aborted += e.aborted ? 1 : 0;
  }
  // The last to arrive reports it; the others are woken by the abort.
  REQUIRE(reported == 1);
  REQUIRE(aborted == 2);
  REQUIRE(abort.aborted());
  REQUIRE_THAT(abort.reason(), Catch::Contains("node 5 called broadcast"));
}

TEST_CASE("a failing collective work aborts the members that wait for it", "[collectives]") {
  AbortSignal abort;
  MeetingPoint rendezvous(3, 0, abort, [&](const MeetingPoint::Calls&) { throw std::runtime_error("work failed"); });
  const auto endings = run_members(3, 1, abort, [&](int index, NodeSlot& slot) {
    if (index != 2) slot.acquire();  // one member waits without a compute slot
    rendezvous.meet(index, all_reduce_of(at::ones({2})), &slot);
  });
  int reported = 0, aborted = 0;
  for (const auto& e : endings) {
    reported += e.error == "work failed" ? 1 : 0;
    aborted += e.aborted ? 1 : 0;
  }
  REQUIRE(reported == 1);
  REQUIRE(aborted == 2);
  REQUIRE(abort.reason() == "work failed");
}

TEST_CASE("an abort wakes the members waiting at the rendezvous, with or without a compute slot", "[collectives]") {
  AbortSignal abort;
  bool worked = false;
  MeetingPoint rendezvous(3, 0, abort, [&](const MeetingPoint::Calls&) { worked = true; });
  std::atomic<int> waiting{0};
  std::thread aborter([&] {
    // Members 0 and 1 arrive; member 2 never does.
    while (waiting.load() < 2) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort.trigger("test abort");
  });
  const auto endings = run_members(3, 2, abort, [&](int index, NodeSlot& slot) {
    if (index == 2) {
      while (!abort.aborted()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      rendezvous.meet(index, all_reduce_of(at::ones({1})), &slot);  // after the abort: refused at once
      return;
    }
    if (index == 0) slot.acquire();  // member 1 waits without a compute slot
    ++waiting;
    rendezvous.meet(index, all_reduce_of(at::ones({1})), &slot);
  });
  aborter.join();
  REQUIRE_FALSE(worked);
  for (const auto& e : endings) {
    REQUIRE(e.aborted);
    REQUIRE(e.error.empty());
  }
}

TEST_CASE("collective calls match only with the same collective, op, root and tensors", "[collectives]") {
  CollectiveCall reference = all_reduce_of(at::ones({4}));
  check_same_collective(all_reduce_of(at::zeros({4})), 1, reference, 0);  // values may differ

  CollectiveCall other_op = all_reduce_of(at::ones({4}));
  other_op.op = exogym::sdk::ReduceOp::Max;
  REQUIRE_THROWS_WITH(check_same_collective(other_op, 2, reference, 0),
                      "collective mismatch: node 2 called all_reduce while node 0 called all_reduce with a "
                      "different op or root");
  CollectiveCall two = all_reduce_of(at::ones({4}));
  two.tensors.push_back(at::ones({1}));
  REQUIRE_THROWS_WITH(check_same_collective(two, 3, reference, 0), Catch::EndsWith("with 2 tensors instead of 1"));
  REQUIRE_THROWS_WITH(check_same_collective(all_reduce_of(at::ones({5})), 1, reference, 0),
                      Catch::Contains("tensor 0 is [5] Float on node 1 but [4] Float on node 0"));
  REQUIRE_THROWS_WITH(check_same_collective(all_reduce_of(at::ones({4}, at::kDouble)), 1, reference, 0),
                      Catch::Contains("Double on node 1 but [4] Float on node 0"));

  // all_gather: shapes may differ, the number of tensors may not.
  CollectiveCall gather = all_reduce_of(at::ones({4}));
  gather.kind = CallKind::AllGather;
  CollectiveCall other_gather = all_reduce_of(at::ones({7, 2}, at::kLong));
  other_gather.kind = CallKind::AllGather;
  check_same_collective(other_gather, 1, gather, 0);
  other_gather.tensors.clear();
  REQUIRE_THROWS_WITH(check_same_collective(other_gather, 1, gather, 0),
                      Catch::EndsWith("all_gather with 0 tensors instead of 1"));
}
