// The hierarchical collectives over several processes: ProcessMeshes in
// threads of this test, as separate processes would hold them, on loopback.
// Every node gets the values one process would give, and a mismatch or a
// failure ends every process with a clear error instead of a hang.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/comm/collective_call.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/dist/tcp_ports.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "testing.h"

using exogym::runtime::dist::node_block;
using exogym::runtime::dist::ProcessMesh;
using exogym::runtime::dist::WorldSpec;
using exogym::runtime::sim::ClockExchange;
using exogym::runtime::threads::NodeSlot;
using exogym::runtime::train::Cluster;
using exogym::sdk::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

// A node's body, with its process's cluster and its compute slot (held).
using NodeBody = std::function<void(int rank, exogym::sdk::Communicator&, Cluster&, NodeSlot&)>;

// Runs body(rank, comm, cluster, slot) on K nodes spread over P meshes, one
// thread per "process", each with its own ProcessMesh and Cluster. Throws
// the first process's error (by process order) if any failed. A minute at
// most.
void run_mesh_nodes(int P, int K, bool exact, const NodeBody& body,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int port = exogym::runtime::dist::pick_free_port();
  std::vector<std::string> errors(P);
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<ProcessMesh*> meshes(P, nullptr);
  int done = 0;
  std::vector<std::thread> threads;
  for (int p = 0; p < P; ++p) {
    threads.emplace_back([&, p] {
      try {
        WorldSpec world;
        world.size = P;
        world.rank = p;
        world.master_port = port;
        world.timeout = timeout;
        world.secret = "test secret";
        ProcessMesh mesh(world, "test");
        {
          std::lock_guard<std::mutex> lock(mutex);
          meshes[p] = &mesh;
        }
        try {
          Cluster cluster(K, 2, mesh, node_block(K, P, p), nullptr, exact);
          cluster.run([&](int rank, NodeSlot& slot) {
            at::set_num_threads(1);
            auto comm = cluster.communicator(rank, &slot);
            slot.acquire();
            body(rank, *comm, cluster, slot);
          });
          mesh.finish();
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          meshes[p] = nullptr;
          throw;
        }
        std::lock_guard<std::mutex> lock(mutex);
        meshes[p] = nullptr;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        errors[p] = e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      ++done;
      cv.notify_all();
    });
  }
  bool finished;
  {
    std::unique_lock<std::mutex> lock(mutex);
    finished = cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == P; });
    if (!finished) {
      for (auto* mesh : meshes) {
        if (mesh) mesh->fail("test timeout");
      }
    }
  }
  for (auto& t : threads) t.join();
  if (!finished) FAIL("the processes did not finish within 60 s");
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
}

void run_meshes(int P, int K, bool exact, const std::function<void(int, exogym::sdk::Communicator&)>& body,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  run_mesh_nodes(
      P, K, exact, [&](int rank, exogym::sdk::Communicator& comm, Cluster&, NodeSlot&) { body(rank, comm); }, timeout);
}

// Random values that differ per node, from a generator seeded by the rank.
at::Tensor shaped_node_values(int rank, at::IntArrayRef shape) {
  auto gen = at::detail::createCPUGenerator(1000 + rank);
  return at::randn(shape, gen, at::kFloat);
}

}  // namespace

TEST_CASE("hierarchical collectives over 2 processes give every node the right values", "[multiprocess]") {
  // 5 nodes over 2 processes: blocks of 2 and 3 nodes.
  const int K = 5;
  std::vector<std::vector<at::Tensor>> results(K);
  std::vector<std::vector<std::vector<at::Tensor>>> gathered(K);
  // Catch's assertions are for the test's own thread (Catch2 3 aborts when
  // two threads assert at once): the node threads record, the test checks.
  std::vector<int> sizes(K), ranks(K);
  run_meshes(2, K, false, [&](int rank, exogym::sdk::Communicator& comm) {
    sizes[rank] = comm.size();
    ranks[rank] = comm.rank();
    std::vector<at::Tensor> mine;
    for (auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max}) {
      at::Tensor f = at::tensor({rank + 1.0, -(rank + 1.0), 10.0 * rank}, at::kFloat);
      at::Tensor d = at::tensor({rank * 0.5, 3.0}, at::kDouble);
      at::Tensor i = at::tensor({int64_t{rank}, int64_t{7}}, at::kLong);
      // A non-contiguous view: the result must land in it.
      at::Tensor matrix = at::arange(6, at::kFloat).reshape({2, 3}) * (rank + 1);
      std::vector<at::Tensor> list{f, d, i, matrix.t()};
      comm.all_reduce(list, op);
      mine.push_back(f);
      mine.push_back(d);
      mine.push_back(i);
      mine.push_back(matrix);
    }
    for (int root : {1, 3}) {
      at::Tensor t = at::full({4}, static_cast<double>(rank), at::kDouble);
      comm.broadcast(t, root);
      mine.push_back(t);
    }
    // Shapes and dtypes differ between ranks.
    gathered[rank] = comm.all_gather({at::full({rank + 1}, rank, at::kLong), at::ones({2, rank}, at::kFloat)});
    comm.barrier();
    results[rank] = mine;
  });
  for (int r = 0; r < K; ++r) {
    REQUIRE(sizes[r] == K);
    REQUIRE(ranks[r] == r);
  }
  // Sums of 1..5, of 0..4 etc.
  const std::vector<std::vector<at::Tensor>> expected_by_op = {
      {at::tensor({15.0, -15.0, 100.0}, at::kFloat), at::tensor({5.0, 15.0}, at::kDouble),
       at::tensor({int64_t{10}, int64_t{35}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3}) * 15},
      {at::tensor({3.0, -3.0, 20.0}, at::kFloat), at::tensor({1.0, 3.0}, at::kDouble),
       at::tensor({int64_t{2}, int64_t{7}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3}) * 3},
      {at::tensor({1.0, -5.0, 0.0}, at::kFloat), at::tensor({0.0, 3.0}, at::kDouble),
       at::tensor({int64_t{0}, int64_t{7}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3})},
      {at::tensor({5.0, -1.0, 40.0}, at::kFloat), at::tensor({2.0, 3.0}, at::kDouble),
       at::tensor({int64_t{4}, int64_t{7}}, at::kLong), at::arange(6, at::kFloat).reshape({2, 3}) * 5}};
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    REQUIRE(results[r].size() == 18);
    for (size_t op = 0; op < 4; ++op) {
      for (size_t t = 0; t < 4; ++t) {
        INFO("op " << op << " tensor " << t);
        REQUIRE(at::equal(results[r][op * 4 + t], expected_by_op[op][t]));
      }
    }
    REQUIRE(at::equal(results[r][16], at::full({4}, 1.0, at::kDouble)));
    REQUIRE(at::equal(results[r][17], at::full({4}, 3.0, at::kDouble)));
    REQUIRE(gathered[r].size() == static_cast<size_t>(K));
    for (int from = 0; from < K; ++from) {
      REQUIRE(at::equal(gathered[r][from][0], at::full({from + 1}, from, at::kLong)));
      REQUIRE(at::equal(gathered[r][from][1], at::ones({2, from}, at::kFloat)));
    }
  }
}

TEST_CASE("exact hierarchical sums match the in-process backend bit for bit, and partial sums agree everywhere",
          "[multiprocess]") {
  const int K = 6;
  const std::vector<int64_t> shape = {1000, 37};
  std::vector<at::Tensor> in_process(K), exact(K), partial(K);
  auto body = [&](std::vector<at::Tensor>& out) {
    return [&](int rank, exogym::sdk::Communicator& comm) {
      std::vector<at::Tensor> list{shaped_node_values(rank, shape), shaped_node_values(rank + 100, {5})};
      comm.all_reduce(list, ReduceOp::Avg);
      out[rank] = list[0];
    };
  };
  exogym::test::run_nodes(K, 2, body(in_process));
  run_meshes(3, K, true, body(exact));
  run_meshes(3, K, false, body(partial));
  for (int r = 0; r < K; ++r) {
    LOCKED(REQUIRE(at::equal(exact[r], in_process[0])));
    LOCKED(REQUIRE(at::equal(partial[r], partial[0])));  // every node of every process holds the same bits
  }
  // Partial sums differ from rank-ordered ones only by association.
  const double scale = in_process[0].abs().max().item<double>();
  REQUIRE((partial[0] - in_process[0]).abs().max().item<double>() <= 1e-6 * scale);
}

TEST_CASE("all_reduce_shared over processes gives the exact sums' bits, one result per process", "[multiprocess]") {
  const int K = 5, P = 2;
  const std::vector<int64_t> shape = {300, 41};
  auto inputs = [&](int rank) {
    return std::vector<at::Tensor>{shaped_node_values(rank, shape), at::full({2}, 3 * rank + 1, at::kLong)};
  };
  std::vector<at::Tensor> in_process(K);
  exogym::test::run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
    auto list = inputs(rank);
    comm.all_reduce(list, ReduceOp::Avg);
    in_process[rank] = list[0];
  });
  std::vector<exogym::sdk::SharedTensors> shared(K);
  // One byte per node, not std::vector<bool>: its bits share words, and the nodes write at once.
  std::vector<char> untouched(K, 0);
  run_meshes(P, K, true, [&](int rank, exogym::sdk::Communicator& comm) {
    const auto mine = inputs(rank);
    shared[rank] = comm.all_reduce_shared(mine, ReduceOp::Avg);
    untouched[rank] = at::equal(mine[0], inputs(rank)[0]);
  });
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    REQUIRE(untouched[r]);
    REQUIRE(at::equal(shared[r]->at(0), in_process[0]));
    REQUIRE(at::equal(shared[r]->at(1), at::full({2}, 7, at::kLong)));  // (1 + 4 + ... + 13) / 5
    // The nodes of one process hold the same result.
    const int first = node_block(K, P, exogym::runtime::dist::process_of_node(r, K, P)).first;
    REQUIRE(shared[r].get() == shared[first].get());
  }
}

TEST_CASE("four processes with one node each reduce, broadcast and gather", "[multiprocess]") {
  const int K = 4;
  std::vector<at::Tensor> sums(K), roots(K);
  std::vector<std::vector<at::Tensor>> gathered(K);
  run_meshes(4, K, false, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor t = at::full({3}, static_cast<int64_t>(1) << rank, at::kLong);
    comm.all_reduce(t, ReduceOp::Sum);
    sums[rank] = t;
    at::Tensor b = at::full({2}, static_cast<float>(rank), at::kFloat);
    comm.broadcast(b, 2);
    roots[rank] = b;
    gathered[rank] = comm.all_gather(at::full({1}, rank * 10, at::kLong));
  });
  for (int r = 0; r < K; ++r) {
    REQUIRE(at::equal(sums[r], at::full({3}, 15, at::kLong)));
    REQUIRE(at::equal(roots[r], at::full({2}, 2.0f)));
    for (int from = 0; from < K; ++from) REQUIRE(gathered[r][from].item<int64_t>() == from * 10);
  }
}

TEST_CASE("collectives follow the live nodes, and a process whose nodes are all down sits them out",
          "[multiprocess][faults]") {
  // 5 nodes over 2 processes (nodes 0-1, 2-4), exact sums; every node meets
  // before each phase, as a run's membership changes do.
  const int K = 5;
  const std::vector<std::vector<int>> phases = {{2, 3, 4}, {0, 3}, {0, 1, 2, 3, 4}};
  std::vector<std::vector<at::Tensor>> averages(K);
  std::vector<at::Tensor> roots(K);
  std::vector<int> wrong_gathers(K, 0);
  run_mesh_nodes(2, K, true, [&](int rank, exogym::sdk::Communicator& comm, Cluster& cluster, NodeSlot& slot) {
    for (const auto& live : phases) {
      cluster.meet_all(rank, &slot, [&cluster, live] { cluster.set_members(live); });
      if (!std::binary_search(live.begin(), live.end(), rank)) continue;
      at::Tensor t = shaped_node_values(rank, {7});
      comm.all_reduce(t, ReduceOp::Avg);
      averages[rank].push_back(t);
      const auto all = comm.all_gather(at::full({1}, rank, at::kLong));
      std::vector<int64_t> ranks;
      for (const auto& g : all) ranks.push_back(g.item<int64_t>());
      // Checked by the test's thread below (Catch's assertions are not for node threads).
      if (ranks != std::vector<int64_t>(live.begin(), live.end())) wrong_gathers[rank]++;
      at::Tensor b = at::full({2}, static_cast<float>(rank), at::kFloat);
      comm.broadcast(b, live.back());
      roots[rank] = b;
    }
  });
  CHECK(wrong_gathers == std::vector<int>(K, 0));  // all_gather's ranks were the live nodes'
  for (int r = 0; r < K; ++r) {
    size_t taken = 0;
    for (const auto& live : phases) {
      if (!std::binary_search(live.begin(), live.end(), r)) continue;
      // Rank order over the live nodes, divided by their count: the bits
      // of one process.
      at::Tensor expected = shaped_node_values(live[0], {7});
      for (size_t i = 1; i < live.size(); ++i) expected.add_(shaped_node_values(live[i], {7}));
      expected.div_(static_cast<int64_t>(live.size()));
      INFO("node " << r << ", live nodes " << live.size());
      REQUIRE(at::equal(averages[r].at(taken++), expected));
    }
    REQUIRE(at::equal(roots[r], at::full({2}, 4.0f)));
  }
}

TEST_CASE("a collective mismatch between processes is an error naming both, not a hang", "[multiprocess]") {
  REQUIRE_THROWS_WITH(run_meshes(2, 4, false,
                                 [&](int rank, exogym::sdk::Communicator& comm) {
                                   at::Tensor t = at::ones({3});
                                   if (rank < 2) {
                                     comm.all_reduce(t, ReduceOp::Sum);
                                   } else {
                                     comm.broadcast(t, 0);
                                   }
                                 }),
                      Catch::Contains("collective mismatch between processes") && Catch::Contains("process 1") &&
                          Catch::Contains("broadcast") && Catch::Contains("all_reduce"));
}

TEST_CASE("a group waiting for a node of another process that waits elsewhere is an error naming both, not a hang",
          "[multiprocess][groups]") {
  const auto started = Clock::now();
  // A heartbeat every second (a timeout of 4 s): found within a few.
  const auto timeout = std::chrono::seconds(4);
  // Node 0 (process 0) waits for node 1 (process 1) in an exchange; node 1
  // all-reduces over everyone.
  REQUIRE_THROWS_WITH(run_meshes(
                          2, 2, false,
                          [&](int rank, exogym::sdk::Communicator& comm) {
                            std::vector<at::Tensor> t{at::ones({2})};
                            if (rank == 0) {
                              comm.exchange(1, t);
                            } else {
                              comm.all_reduce(t);
                            }
                          },
                          timeout),
                      Catch::Contains("deadlock across processes 0, 1: node 0 waits in exchange between nodes 0 and 1 "
                                      "for node 1, which waits in all_reduce over every live node" +
                                      std::string(exogym::runtime::comm::kDeadlockAdvice)));
  // Node 1 ends its run while node 0 waits for it in a group.
  REQUIRE_THROWS_WITH(run_meshes(
                          2, 2, false,
                          [&](int rank, exogym::sdk::Communicator& comm) {
                            std::vector<at::Tensor> t{at::ones({2})};
                            if (rank == 0) comm.group_all_reduce({0, 1}, t);
                          },
                          timeout),
                      Catch::Contains("node 0 waits in group_all_reduce over nodes [0, 1] for node 1, which has "
                                      "finished its run"));
  // A cycle through both processes: 0 waits for 2, 2 for 1, 1 for 0.
  REQUIRE_THROWS_WITH(run_meshes(
                          2, 4, false,
                          [&](int rank, exogym::sdk::Communicator& comm) {
                            const int peer = rank == 0 ? 2 : rank == 2 ? 1 : rank == 1 ? 0 : -1;
                            if (peer >= 0) comm.exchange(peer, {at::ones({2})});
                          },
                          timeout),
                      Catch::Contains("deadlock across processes 0, 1") &&
                          Catch::Contains("waits in exchange between nodes 0 and 2") &&
                          Catch::Contains("waits in exchange between nodes 1 and 2") &&
                          Catch::Contains("waits in exchange between nodes 0 and 1"));
  REQUIRE(std::chrono::duration<double>(Clock::now() - started).count() < 45);
}

TEST_CASE("a node error in one process stops the others with its message", "[multiprocess]") {
  const auto started = Clock::now();
  try {
    run_meshes(2, 4, false, [&](int rank, exogym::sdk::Communicator& comm) {
      for (int i = 0; i < 5; ++i) {
        if (rank == 3 && i == 2) throw exogym::sdk::Error("node 3 gives up");
        at::Tensor t = at::ones({3});
        comm.all_reduce(t, ReduceOp::Sum);
      }
    });
    FAIL("the run should have failed");
  } catch (const std::runtime_error& e) {
    // Process 0 reports first: its nodes were stopped by process 1's failure.
    REQUIRE_THAT(e.what(), Catch::Contains("process 1 (nodes 2-3") && Catch::Contains("failed") &&
                               Catch::Contains("node 3 gives up"));
  }
  REQUIRE(std::chrono::duration<double>(Clock::now() - started).count() < 30);
}

TEST_CASE("the clock exchange shares the latest arrival across processes", "[multiprocess]") {
  ClockExchange clocks(4);
  // This process hosts nodes 2 and 3; runtime collectives post nothing.
  REQUIRE_FALSE(clocks.take_local({2, 3}).has_value());
  clocks.post(2, 0, 1.5);
  clocks.post(3, 0, 2.5);
  auto local = clocks.take_local({2, 3});
  REQUIRE(local.has_value());
  REQUIRE(local->sequence == 0);
  REQUIRE(local->latest == 2.5);
  REQUIRE_FALSE(clocks.take_local({2, 3}).has_value());  // taken once
  REQUIRE(clocks.latest(0) == 2.5);
  clocks.share_latest(0, 4.0);  // a node of another process arrived later
  REQUIRE(clocks.latest(0) == 4.0);
  clocks.post(2, 1, 5.0);
  clocks.post(3, 1, 6.0);
  REQUIRE(clocks.take_local({2, 3})->latest == 6.0);
  clocks.share_latest(1, 6.0);
  REQUIRE(clocks.latest(1) == 6.0);
}

TEST_CASE("subgroups across processes give the in-process backend's bits, and pairs in any order meet",
          "[multiprocess][groups]") {
  // 6 nodes over 3 processes (blocks {0,1}, {2,3}, {4,5}). Groups {0, 3, 4}
  // and {1, 2, 5} span every process; then pairs {0,5}, {1,4}, {2,3}, whose
  // processes meet in no fixed order; then a gather of different shapes.
  const int K = 6;
  auto body = [&](std::vector<at::Tensor>& reduced, std::vector<std::vector<at::Tensor>>& pair,
                  std::vector<std::vector<std::vector<at::Tensor>>>& gathered) {
    return [&](int rank, exogym::sdk::Communicator& comm) {
      std::vector<at::Tensor> t{shaped_node_values(rank, {1000})};
      const bool a = rank == 0 || rank == 3 || rank == 4;
      comm.group_all_reduce(a ? std::vector<int>{0, 3, 4} : std::vector<int>{1, 2, 5}, t, ReduceOp::Avg);
      reduced[rank] = t[0];
      pair[rank] = comm.exchange(5 - rank, {shaped_node_values(10 + rank, {7}), at::full({rank + 1}, rank, at::kLong)});
      if (rank % 2 == 0) gathered[rank] = comm.group_all_gather({0, 2, 4}, {at::ones({rank + 1})});
    };
  };
  std::vector<at::Tensor> reduced(K), reduced_one(K);
  std::vector<std::vector<at::Tensor>> pair(K), pair_one(K);
  std::vector<std::vector<std::vector<at::Tensor>>> gathered(K), gathered_one(K);
  run_meshes(3, K, true, body(reduced, pair, gathered));
  exogym::test::run_nodes(K, 2, body(reduced_one, pair_one, gathered_one));
  for (int r = 0; r < K; ++r) {
    INFO("node " << r);
    REQUIRE(at::equal(reduced[r], reduced_one[r]));
    REQUIRE(at::equal(pair[r][0], shaped_node_values(10 + 5 - r, {7})));
    REQUIRE(at::equal(pair[r][1], at::full({6 - r}, 5 - r, at::kLong)));
    if (r % 2 == 0) {
      REQUIRE(gathered[r].size() == 3);
      for (int j = 0; j < 3; ++j) REQUIRE(at::equal(gathered[r][j][0], at::ones({2 * j + 1})));
    }
  }
  at::Tensor expected =
      (shaped_node_values(0, {1000}) + shaped_node_values(3, {1000})).add_(shaped_node_values(4, {1000})).div_(3);
  REQUIRE(at::equal(reduced[0], expected));
}
