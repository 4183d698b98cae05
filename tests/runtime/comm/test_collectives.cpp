// The in-process collective backend and the simulated cluster: values,
// ordering, bit-identical reductions for any parallelism, and abort without
// hangs.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "exogym/runtime/comm/inprocess_group.h"
#include "exogym/runtime/comm/meeting_point.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/threads/compute_slots.h"
#include "exogym/runtime/threads/work_crew.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "testing.h"

using exogym::sdk::ReduceOp;
using exogym::test::run_nodes;

TEST_CASE("all_reduce computes sum, avg, min and max across nodes", "[collectives]") {
  const int K = 4;
  for (auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max}) {
    std::vector<at::Tensor> results(K);
    run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
      // Node r holds [r+1, -(r+1), 10*r].
      at::Tensor t = at::tensor({rank + 1.0, -(rank + 1.0), 10.0 * rank}, at::kFloat);
      comm.all_reduce(t, op);
      results[rank] = t;
    });
    at::Tensor expected;
    switch (op) {
      case ReduceOp::Sum:
        expected = at::tensor({10.0, -10.0, 60.0}, at::kFloat);
        break;
      case ReduceOp::Avg:
        expected = at::tensor({2.5, -2.5, 15.0}, at::kFloat);
        break;
      case ReduceOp::Min:
        expected = at::tensor({1.0, -4.0, 0.0}, at::kFloat);
        break;
      case ReduceOp::Max:
        expected = at::tensor({4.0, -1.0, 30.0}, at::kFloat);
        break;
    }
    for (int r = 0; r < K; ++r) {
      INFO("op " << exogym::sdk::to_string(op) << " node " << r);
      REQUIRE(at::equal(results[r], expected));
    }
  }
}

TEST_CASE("all_reduce takes a list of tensors, including non-contiguous ones", "[collectives]") {
  const int K = 3;
  std::vector<std::vector<at::Tensor>> results(K);
  run_nodes(K, 3, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor matrix = at::arange(6, at::kDouble).reshape({2, 3}) * (rank + 1);
    at::Tensor transposed = matrix.t();  // a non-contiguous view: results must land in it
    at::Tensor scalar = at::full({}, rank, at::kLong);
    std::vector<at::Tensor> list{transposed, scalar};
    comm.all_reduce(list, ReduceOp::Sum);
    results[rank] = {matrix, scalar};
  });
  for (int r = 0; r < K; ++r) {
    REQUIRE(at::equal(results[r][0], at::arange(6, at::kDouble).reshape({2, 3}) * 6));
    REQUIRE(results[r][1].item<int64_t>() == 3);
  }
}

TEST_CASE("all_reduce of the rows of one stack gives every row the rank-order sum", "[collectives][stacked]") {
  // Stacked execution's gradients are rows of a [K, ...] stack: the others'
  // rows are filled with one copy, the bits of a fold in rank order.
  const int K = 4;
  for (auto dtype : {at::kDouble, at::kFloat}) {
    for (auto op : {ReduceOp::Sum, ReduceOp::Avg}) {
      at::manual_seed(3);
      const at::Tensor values = at::randn({K, 3, 5}, dtype);
      const at::Tensor stack = values.clone();
      run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) { comm.all_reduce(stack[rank], op); });
      at::Tensor expected = values[0].clone();
      for (int r = 1; r < K; ++r) expected.add_(values[r]);
      if (op == ReduceOp::Avg) expected.div_(K);
      for (int r = 0; r < K; ++r) {
        INFO(c10::toString(dtype) << " " << exogym::sdk::to_string(op) << " row " << r);
        CHECK(at::equal(stack[r], expected));
      }
    }
  }
}

TEST_CASE("broadcast copies the root's tensors to every node", "[collectives]") {
  const int K = 4;
  std::vector<at::Tensor> results(K);
  run_nodes(K, 1, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor t = at::full({5}, static_cast<float>(rank));
    comm.broadcast(t, 2);
    results[rank] = t;
  });
  for (int r = 0; r < K; ++r) REQUIRE(at::equal(results[r], at::full({5}, 2.0f)));
}

TEST_CASE("all_gather returns every node's tensors in rank order, shapes may differ", "[collectives]") {
  const int K = 4;
  std::vector<std::vector<at::Tensor>> results(K);
  run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor mine = at::full({rank + 1}, static_cast<float>(rank));
    results[rank] = comm.all_gather(mine);
    mine.fill_(-1);  // gathered tensors are copies, not views of the sender's
  });
  for (int r = 0; r < K; ++r) {
    REQUIRE(results[r].size() == static_cast<size_t>(K));
    for (int s = 0; s < K; ++s) REQUIRE(at::equal(results[r][s], at::full({s + 1}, static_cast<float>(s))));
  }
}

TEST_CASE("large broadcasts and all_gathers, shared by the work crew, give every node the right copies",
          "[collectives]") {
  // 4 nodes × 300k elements: past the size where helpers join the last node.
  const int K = 4;
  const int64_t n = 300000;
  std::vector<at::Tensor> broadcast(K);
  std::vector<std::vector<at::Tensor>> gathered(K);
  run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor t = at::arange(n, at::kFloat) + rank;
    comm.broadcast(t, 3);
    broadcast[rank] = t;
    at::Tensor mine = at::full({n}, static_cast<float>(rank));
    gathered[rank] = comm.all_gather(mine);
  });
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    REQUIRE(at::equal(broadcast[r], at::arange(n, at::kFloat) + 3));
    REQUIRE(gathered[r].size() == static_cast<size_t>(K));
    for (int s = 0; s < K; ++s) REQUIRE(at::equal(gathered[r][s], at::full({n}, static_cast<float>(s))));
    // Every node got its own copies.
    for (int q = 0; q < r; ++q) REQUIRE(gathered[r][0].data_ptr() != gathered[q][0].data_ptr());
  }
}

TEST_CASE("barrier holds every node until all arrive", "[collectives]") {
  const int K = 6;
  std::atomic<int> arrived{0};
  std::atomic<bool> early{false};
  run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    arrived++;
    comm.barrier();
    if (arrived.load() != K) early = true;
  });
  REQUIRE_FALSE(early);
}

TEST_CASE("all_reduce sums in rank order: bit-identical for any parallelism", "[collectives]") {
  // Values of wildly different magnitude make float addition order visible.
  const int K = 8;
  const int64_t n = 150000;  // several work chunks per tensor, enough for the work crew to join
  auto input = [&](int rank) {
    auto gen = at::detail::createCPUGenerator(1234 + rank);
    return at::randn({n}, gen, at::kFloat) * std::pow(10.0f, static_cast<float>(rank % 4) * 3);
  };
  at::Tensor expected = input(0).clone();
  for (int r = 1; r < K; ++r) expected.add_(input(r));

  for (int parallelism : {1, 3, 8}) {
    std::vector<at::Tensor> results(K);
    run_nodes(K, parallelism, [&](int rank, exogym::sdk::Communicator& comm) {
      std::vector<at::Tensor> list{input(rank), at::ones({3}) * rank};
      comm.all_reduce(list, ReduceOp::Sum);
      results[rank] = list[0];
    });
    for (int r = 0; r < K; ++r) {
      INFO("parallelism " << parallelism << " node " << r);
      REQUIRE(at::equal(results[r], expected));
    }
  }
  // And the order matters: a different order gives different bits.
  at::Tensor reversed = input(K - 1).clone();
  for (int r = K - 2; r >= 0; --r) reversed.add_(input(r));
  REQUIRE_FALSE(at::equal(reversed, expected));
}

TEST_CASE("all_reduce_shared gives all_reduce's bits in one result the nodes share, and leaves their tensors alone",
          "[collectives]") {
  const int K = 5;
  // A float matrix large enough for several chunks and the work crew, a
  // small one, a non-contiguous view, a double and an integer tensor.
  auto inputs = [&](int rank) {
    auto gen = at::detail::createCPUGenerator(77 + rank);
    at::Tensor big = at::randn({300, 1000}, gen, at::kFloat) * std::pow(10.0f, static_cast<float>(rank % 3) * 2);
    at::Tensor matrix = at::randn({4, 6}, gen, at::kFloat);
    return std::vector<at::Tensor>{big, at::randn({7}, gen, at::kFloat), matrix.t(), at::randn({3}, gen, at::kDouble),
                                   at::full({2}, 3 * rank + 1, at::kLong)};
  };
  for (auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max}) {
    std::vector<std::vector<at::Tensor>> expected(K);
    std::vector<exogym::sdk::SharedTensors> shared(K);
    // One byte per node, not std::vector<bool>: its bits share words, and the nodes write at once.
    std::vector<char> untouched(K, 0);
    run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
      std::vector<at::Tensor> mine = inputs(rank);
      shared[rank] = comm.all_reduce_shared(mine, op);
      untouched[rank] = 1;
      for (size_t i = 0; i < mine.size(); ++i) untouched[rank] = untouched[rank] && at::equal(mine[i], inputs(rank)[i]);
      expected[rank] = inputs(rank);
      comm.all_reduce(expected[rank], op);
    });
    for (int r = 0; r < K; ++r) {
      INFO("op " << exogym::sdk::to_string(op) << " node " << r);
      REQUIRE(untouched[r]);
      // One result for the whole process: the same tensors, not copies.
      REQUIRE(shared[r].get() == shared[0].get());
      REQUIRE(shared[r]->size() == expected[r].size());
      for (size_t i = 0; i < expected[r].size(); ++i) {
        const at::Tensor& t = (*shared[r])[i];
        REQUIRE(t.is_contiguous());
        REQUIRE(t.scalar_type() == expected[r][i].scalar_type());
        REQUIRE(at::equal(t, expected[r][i]));
      }
    }
  }
}

TEST_CASE("all_reduce_shared over the live nodes, and on a node alone", "[collectives]") {
  exogym::runtime::threads::AbortSignal abort;
  exogym::runtime::comm::InProcessGroup group(4, abort);
  group.set_members({0, 2, 3});
  std::vector<exogym::sdk::SharedTensors> shared(4);
  std::vector<std::thread> threads;
  for (int rank : {0, 2, 3}) {
    threads.emplace_back([&, rank] {
      auto comm = group.communicator(rank);
      shared[rank] = comm->all_reduce_shared({at::full({3}, rank + 1.0f)}, ReduceOp::Avg);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank : {0, 2, 3}) REQUIRE(at::equal(shared[rank]->at(0), at::full({3}, 8.0f / 3)));

  run_nodes(1, 1, [&](int, exogym::sdk::Communicator& comm) {
    at::Tensor t = at::tensor({1.5f, 2.5f});
    auto alone = comm.all_reduce_shared({t}, ReduceOp::Avg);
    LOCKED(REQUIRE(at::equal(alone->at(0), t)));
    REQUIRE_FALSE(alone->at(0).is_same(t));  // a copy: the node may write its own
  });
}

TEST_CASE("at most `parallelism` nodes compute at once", "[collectives]") {
  const int K = 6;
  std::atomic<int> computing{0}, most{0};
  run_nodes(K, 2, [&](int, exogym::sdk::Communicator& comm) {
    for (int step = 0; step < 5; ++step) {
      int now = ++computing;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --computing;
      at::Tensor t = at::ones({4});
      comm.all_reduce(t);
    }
  });
  REQUIRE(most.load() >= 1);
  REQUIRE(most.load() <= 2);
}

TEST_CASE("a failing node aborts every collective: no hang, first error reported", "[collectives]") {
  const int K = 4;
  auto started = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(run_nodes(K, 2,
                                [&](int rank, exogym::sdk::Communicator& comm) {
                                  at::Tensor t = at::ones({16});
                                  comm.all_reduce(t);  // one successful round
                                  if (rank == 2) throw std::runtime_error("node 2 exploded");
                                  for (int i = 0; i < 3; ++i) comm.all_reduce(t);  // the others wait here
                                }),
                      "node 2 exploded");
  REQUIRE(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
}

TEST_CASE("mismatched collectives are reported, not deadlocked", "[collectives]") {
  REQUIRE_THROWS_WITH(run_nodes(3, 3,
                                [&](int rank, exogym::sdk::Communicator& comm) {
                                  at::Tensor t = at::ones({rank == 1 ? 5 : 4});
                                  comm.all_reduce(t);
                                }),
                      Catch::Contains("collective mismatch") && Catch::Contains("node 1"));
  // Node 0 all-reduces, node 1 calls `other`.
  auto against_all_reduce = [](const std::function<void(exogym::sdk::Communicator&, const at::Tensor&)>& other) {
    run_nodes(2, 2, [&](int rank, exogym::sdk::Communicator& comm) {
      at::Tensor t = at::ones({4});
      if (rank == 0) {
        comm.all_reduce(t);
      } else {
        other(comm, t);
      }
    });
  };
  REQUIRE_THROWS_WITH(against_all_reduce([](auto& comm, const at::Tensor& t) { comm.broadcast(t, 0); }),
                      Catch::Contains("called broadcast while node 0 called all_reduce"));
  REQUIRE_THROWS_WITH(against_all_reduce([](auto& comm, const at::Tensor& t) { comm.all_reduce_shared({t}); }),
                      Catch::Contains("node 1 called all_reduce_shared while node 0 called all_reduce"));
}

TEST_CASE("a single node's collectives are identities", "[collectives]") {
  run_nodes(1, 1, [&](int, exogym::sdk::Communicator& comm) {
    at::Tensor t = at::tensor({1.5f, 2.5f});
    comm.all_reduce(t, ReduceOp::Avg);
    LOCKED(REQUIRE(at::equal(t, at::tensor({1.5f, 2.5f}))));
    auto gathered = comm.all_gather(t);
    LOCKED(REQUIRE(gathered.size() == 1));
    LOCKED(REQUIRE(at::equal(gathered[0], t)));
    comm.barrier();
  });
}

TEST_CASE("a released compute slot goes to the longest waiter", "[collectives]") {
  exogym::runtime::threads::AbortSignal abort;
  exogym::runtime::threads::ComputeSlots slots(1, abort);
  exogym::runtime::threads::NodeSlot holder(&slots);
  holder.acquire();
  // Three threads queue up one after another; each records when it got the slot.
  std::mutex order_mutex;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  std::atomic<int> started{0};
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] {
      exogym::runtime::threads::NodeSlot mine(&slots);
      ++started;
      mine.acquire();
      {
        std::lock_guard<std::mutex> lock(order_mutex);
        order.push_back(i);
      }
      mine.release();
    });
    // Let thread i reach the queue before thread i + 1 starts.
    while (started.load() <= i) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  holder.release();
  for (auto& t : waiters) t.join();
  REQUIRE(order == std::vector<int>{0, 1, 2});
}

TEST_CASE("a parked node wakes only once it is granted a slot", "[collectives]") {
  exogym::runtime::threads::AbortSignal abort;
  exogym::runtime::threads::ComputeSlots slots(1, abort);
  std::atomic<bool> woke{false}, held_after{false};
  exogym::runtime::threads::NodeSlot* parked = nullptr;
  std::atomic<bool> is_parked{false};
  std::thread node([&] {
    exogym::runtime::threads::NodeSlot slot(&slots);
    slot.acquire();
    parked = &slot;
    slot.park();  // gives the slot back without queueing for it
    is_parked = true;
    slot.wait_granted();
    woke = true;
    held_after = slot.held();
  });
  while (!is_parked.load()) std::this_thread::yield();
  // The slot is free, but a parked node does not take it by itself.
  exogym::runtime::threads::NodeSlot other(&slots);
  other.acquire();  // would hang if the parked node still held the slot
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  REQUIRE_FALSE(woke.load());
  // Granted while the slot is busy: it waits in line, then gets it.
  slots.grant({&parked->waiter()});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  REQUIRE_FALSE(woke.load());
  other.release();
  node.join();
  REQUIRE(woke.load());
  REQUIRE(held_after.load());
}

TEST_CASE("an abort wakes parked and queued nodes", "[collectives]") {
  exogym::runtime::threads::AbortSignal abort;
  exogym::runtime::threads::ComputeSlots slots(1, abort);
  std::atomic<int> aborted{0};
  std::atomic<bool> is_parked{false};
  std::thread parked([&] {
    exogym::runtime::threads::NodeSlot slot(&slots);
    try {
      slot.acquire();
      slot.park();  // as in a collective: never granted, since the others never arrive
      is_parked = true;
      slot.wait_granted();
    } catch (const exogym::sdk::AbortedError&) {
      ++aborted;
    }
  });
  while (!is_parked.load()) std::this_thread::yield();
  exogym::runtime::threads::NodeSlot holder(&slots);
  holder.acquire();
  std::thread queued([&] {
    exogym::runtime::threads::NodeSlot slot(&slots);
    try {
      slot.acquire();
    } catch (const exogym::sdk::AbortedError&) {
      ++aborted;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  abort.trigger("test abort");
  queued.join();
  parked.join();
  REQUIRE(aborted.load() == 2);
}

TEST_CASE("an abort lets a waiting node leave a collective only once the work on its call is over", "[collectives]") {
  // The last node to arrive works on every node's call (all_gather writes
  // into a result in the caller's stack frame): a node that left on the
  // abort while that work went on would have it write into freed memory.
  for (bool with_slots : {false, true}) {
    INFO((with_slots ? "parked in a compute slot" : "without compute slots"));
    exogym::runtime::threads::AbortSignal abort;
    exogym::runtime::threads::ComputeSlots slots(2, abort);
    std::atomic<bool> working{false}, finish{false}, work_done{false};
    exogym::runtime::comm::MeetingPoint meeting(2, 0, abort, [&](const exogym::runtime::comm::MeetingPoint::Calls&) {
      working = true;
      while (!finish.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      work_done = true;
    });
    std::atomic<int> left_aborted{0}, left_early{0};
    auto node = [&](int index) {
      exogym::runtime::threads::NodeSlot slot(with_slots ? &slots : nullptr);
      slot.acquire();
      try {
        meeting.meet(index, exogym::runtime::comm::CollectiveCall(), &slot);
      } catch (const exogym::sdk::AbortedError&) {
        ++left_aborted;
      }
      if (!work_done.load()) ++left_early;
    };
    std::thread first(node, 0), second(node, 1);
    while (!working.load()) std::this_thread::yield();
    abort.trigger("test abort");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(left_aborted.load() == 0);  // the waiting node still waits for the work
    finish = true;
    first.join();
    second.join();
    REQUIRE(left_early.load() == 0);
    // The waiting node, and with compute slots the worker too (it cannot
    // take a slot back once the run is aborted).
    REQUIRE(left_aborted.load() == (with_slots ? 2 : 1));
  }
}

TEST_CASE("pinned compute slots keep the nodes that compute at once on different CPUs", "[collectives]") {
  const int cores = exogym::runtime::host::available_cores();
  exogym::runtime::threads::AbortSignal abort;
  exogym::runtime::threads::ComputeSlots slots(cores, abort);
  slots.pin_threads();
  REQUIRE(slots.pinned());
  // One CPU per slot, all different.
  std::set<int> seen;
  for (int s = 0; s < cores; ++s) {
    REQUIRE(slots.cpus_of(s).size() == 1);
    seen.insert(slots.cpus_of(s).front());
  }
  REQUIRE(seen.size() == static_cast<size_t>(cores));
  // `cores` threads hold a slot each at the same time; each runs only on its slot's CPU.
  std::vector<std::set<int>> affinity(cores);
  std::atomic<int> holding{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < cores; ++i) {
    threads.emplace_back([&, i] {
      exogym::runtime::threads::NodeSlot slot(&slots);
      slot.acquire();
      ++holding;
      while (holding.load() < cores) std::this_thread::yield();
      cpu_set_t set;
      CPU_ZERO(&set);
      pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) affinity[i].insert(c);
      slot.release();
    });
  }
  for (auto& t : threads) t.join();
  std::set<int> used;
  for (const auto& cpus : affinity) {
    REQUIRE(cpus.size() == 1);
    used.insert(*cpus.begin());
  }
  REQUIRE(used == seen);
  // More slots than CPUs: nothing to pin.
  exogym::runtime::threads::ComputeSlots crowded(cores + 1, abort);
  crowded.pin_threads();
  REQUIRE_FALSE(crowded.pinned());
}

TEST_CASE("the work crew runs every item exactly once, rethrows the first failure, gives helpers their threads",
          "[collectives]") {
  for (int helpers : {0, 1, 3}) {
    INFO(helpers << " helpers");
    exogym::runtime::threads::WorkCrew crew(helpers);
    for (int job = 0; job < 20; ++job) {  // the same crew, job after job
      std::vector<std::atomic<int>> done(257);
      crew.run(257, [&](int64_t i) { ++done[static_cast<size_t>(i)]; });
      for (auto& d : done) REQUIRE(d.load() == 1);
    }
    std::atomic<int> ran{0};
    REQUIRE_THROWS_WITH(crew.run(50,
                                 [&](int64_t i) {
                                   ++ran;
                                   if (i == 7) throw std::runtime_error("item 7 failed");
                                 }),
                        "item 7 failed");
    REQUIRE(ran.load() == 50);  // the other items still ran
  }
  // Helpers with a compute slot's intra-op threads (a stack's crew).
  exogym::runtime::threads::WorkCrew crew(1, 2);
  std::mutex mutex;
  std::vector<int> helper_threads;  // the intra-op count of each item the helper ran
  const auto caller = std::this_thread::get_id();
  crew.run(8, [&](int64_t) {
    // Each item takes a while, so that the helper gets some.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::lock_guard<std::mutex> lock(mutex);
    if (std::this_thread::get_id() != caller) helper_threads.push_back(at::get_num_threads());
  });
  REQUIRE_FALSE(helper_threads.empty());
  for (int n : helper_threads) CHECK(n == 2);
}
