// Collectives over a subgroup and pairwise exchanges (sdk/comm.h's
// group_all_reduce, group_all_gather, exchange) in one process: values, rank
// order and bits, non-members not blocked, bad input and deadlocks as errors
// naming the nodes, never a hang.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "exogym/runtime/comm/collective_call.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "helpers.h"
#include "locked_assertions.h"
#include "testing.h"

using exogym::sdk::ReduceOp;
using exogym::test::run_nodes;

namespace {

at::Tensor group_node_values(int rank, int64_t n) {
  auto gen = at::detail::createCPUGenerator(2000 + rank);
  return at::randn({n}, gen, at::kFloat);
}

}  // namespace

TEST_CASE("group_all_reduce averages within each group in rank order, the bits of a fold in rank order",
          "[collectives][groups]") {
  const int K = 6;
  std::vector<at::Tensor> before(K), after(K);
  // Two groups at once, {0, 2, 5} and {1, 3, 4}, then pairs {0, 1}.
  run_nodes(K, 2, [&](int rank, exogym::sdk::Communicator& comm) {
    at::Tensor t = group_node_values(rank, 1000);
    before[rank] = t.clone();
    const std::vector<int> group =
        (rank == 0 || rank == 2 || rank == 5) ? std::vector<int>{0, 2, 5} : std::vector<int>{1, 3, 4};
    std::vector<at::Tensor> list{t};
    comm.group_all_reduce(group, list, ReduceOp::Avg);
    after[rank] = t.clone();
    if (rank <= 1) {
      std::vector<at::Tensor> s{at::full({3}, rank + 1.0)};
      comm.group_all_reduce({0, 1}, s);  // a sum
      LOCKED(REQUIRE(at::equal(s[0], at::full({3}, 3.0))));
    }
  });
  for (const std::vector<int>& group : {std::vector<int>{0, 2, 5}, std::vector<int>{1, 3, 4}}) {
    at::Tensor expected = before[group[0]].clone();
    for (size_t j = 1; j < group.size(); ++j) expected.add_(before[group[j]]);
    expected.div_(3.0);
    for (int r : group) {
      INFO("node " << r);
      REQUIRE(at::equal(after[r], expected));  // bit for bit
    }
  }
}

TEST_CASE("group_all_gather and exchange return the members' tensors in rank order", "[collectives][groups]") {
  run_nodes(4, 2, [&](int rank, exogym::sdk::Communicator& comm) {
    // Shapes may differ between members, as in all_gather.
    const at::Tensor mine = at::full({rank + 1}, static_cast<float>(rank));
    if (rank != 2) {
      auto gathered = comm.group_all_gather({0, 1, 3}, {mine});
      LOCKED(REQUIRE(gathered.size() == 3));
      LOCKED(REQUIRE(at::equal(gathered[2][0], at::full({4}, 3.0f))));
      LOCKED(REQUIRE(at::equal(gathered[0][0], at::full({1}, 0.0f))));
    }
    // Pairs {0, 3} and {1, 2}.
    const int peer = 3 - rank;
    auto theirs = comm.exchange(peer, {mine, mine * 2});
    LOCKED(REQUIRE(theirs.size() == 2));
    LOCKED(REQUIRE(at::equal(theirs[0], at::full({peer + 1}, static_cast<float>(peer)))));
    LOCKED(REQUIRE(at::equal(theirs[1], at::full({peer + 1}, 2.0f * peer))));
  });
}

TEST_CASE("a node outside a group is not blocked by it", "[collectives][groups]") {
  std::atomic<bool> node2_done{false};
  run_nodes(3, 3, [&](int rank, exogym::sdk::Communicator& comm) {
    if (rank == 2) {
      node2_done = true;  // never calls anything
      return;
    }
    // Node 0 arrives late: node 1 waits in the group, node 2 is not held.
    if (rank == 0) {
      for (int i = 0; i < 200 && !node2_done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::vector<at::Tensor> t{at::ones({2})};
    comm.group_all_reduce({0, 1}, t);
  });
  REQUIRE(node2_done);
}

TEST_CASE("bad groups and peers are errors naming the collective and the node", "[collectives][groups]") {
  auto on_node_1 = [](const std::function<void(exogym::sdk::Communicator&)>& call) {
    run_nodes(3, 3, [&](int rank, exogym::sdk::Communicator& comm) {
      if (rank == 1) call(comm);
    });
  };
  std::vector<at::Tensor> t{at::ones({2})};
  REQUIRE_THROWS_WITH(on_node_1([&](auto& comm) { comm.group_all_reduce({1}, t); }),
                      "group_all_reduce by node 1: a group needs two members or more, got [1]");
  REQUIRE_THROWS_WITH(on_node_1([&](auto& comm) {
                        comm.group_all_reduce({2, 1}, t);
                      }),
                      "group_all_reduce by node 1: the members [2, 1] are not in ascending order without repeats");
  REQUIRE_THROWS_WITH(on_node_1([&](auto& comm) {
                        comm.group_all_gather({1, 1, 2}, t);
                      }),
                      Catch::Contains("group_all_gather by node 1") && Catch::Contains("without repeats"));
  REQUIRE_THROWS_WITH(on_node_1([&](auto& comm) {
                        comm.group_all_reduce({0, 2}, t);
                      }),
                      "group_all_reduce by node 1: the members [0, 2] do not include the node itself");
  REQUIRE_THROWS_WITH(on_node_1([&](auto& comm) { comm.exchange(1, t); }),
                      "exchange by node 1: the peer is the node itself");
  REQUIRE_THROWS_WITH(on_node_1([&](auto& comm) { comm.exchange(7, t); }),
                      "exchange by node 1: node 7 is not a live node (live: [0, 1, 2])");
}

TEST_CASE("a group waiting for a node that waits elsewhere is an error naming both, not a hang",
          "[collectives][groups]") {
  const auto started = std::chrono::steady_clock::now();
  // Node 0 waits for node 1 in an exchange; node 1 all-reduces over everyone.
  REQUIRE_THROWS_WITH(run_nodes(3, 3,
                                [&](int rank, exogym::sdk::Communicator& comm) {
                                  std::vector<at::Tensor> t{at::ones({2})};
                                  if (rank == 0) {
                                    comm.exchange(1, t);
                                  } else {
                                    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
                                    comm.all_reduce(t);
                                  }
                                }),
                      "deadlock: node 0 waits in exchange between nodes 0 and 1 for node 1, which waits in all_reduce "
                      "over every live node" +
                          std::string(exogym::runtime::comm::kDeadlockAdvice));
  // Node 1 ends its run while node 0 waits for it in a group.
  REQUIRE_THROWS_WITH(run_nodes(2, 2,
                                [&](int rank, exogym::sdk::Communicator& comm) {
                                  std::vector<at::Tensor> t{at::ones({2})};
                                  if (rank == 0) comm.group_all_reduce({0, 1}, t);
                                }),
                      Catch::Contains("node 0 waits in group_all_reduce over nodes [0, 1] for node 1, which has "
                                      "finished its run"));
  REQUIRE(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
}

TEST_CASE("a cycle of exchanges is an error naming every node in it, whatever the arrival order",
          "[collectives][groups]") {
  for (int late : {0, 1, 2}) {
    INFO("node " << late << " arrives last");
    // 0 waits for 1, 1 for 2, 2 for 0.
    REQUIRE_THROWS_WITH(run_nodes(3, 3,
                                  [&](int rank, exogym::sdk::Communicator& comm) {
                                    if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(50));
                                    comm.exchange((rank + 1) % 3, {at::ones({2})});
                                  }),
                        Catch::Contains("node 0 waits in exchange between nodes 0 and 1 for node 1") &&
                            Catch::Contains("node 1 waits in exchange between nodes 1 and 2 for node 2") &&
                            Catch::Contains("node 2 waits in exchange between nodes 0 and 2 for node 0"));
  }
}

TEST_CASE("exchanges on a ring in the order the deadlock message advises complete, K even or odd",
          "[collectives][groups]") {
  for (int K : {2, 3, 4, 5}) {
    INFO(K << " nodes");
    std::vector<double> received(static_cast<size_t>(K));
    run_nodes(K, K, [&](int rank, exogym::sdk::Communicator& comm) {
      const int right = (rank + 1) % K, left = (rank + K - 1) % K;
      const std::vector<int> order = rank % 2 == 0 ? std::vector<int>{right, left} : std::vector<int>{left, right};
      double sum = 0;
      for (int peer : order) sum += comm.exchange(peer, {at::full({1}, static_cast<double>(rank))})[0].item<double>();
      received[static_cast<size_t>(rank)] = sum;
    });
    // Each node got its two neighbours' values (one neighbour twice with K = 2).
    for (int rank = 0; rank < K; ++rank)
      CHECK(received[static_cast<size_t>(rank)] == static_cast<double>((rank + 1) % K + (rank + K - 1) % K));
  }
  // All of them right first: the cycle the message describes.
  REQUIRE_THROWS_WITH(run_nodes(3, 3,
                                [&](int rank, exogym::sdk::Communicator& comm) {
                                  comm.exchange((rank + 1) % 3, {at::ones({1})});
                                  comm.exchange((rank + 2) % 3, {at::ones({1})});
                                }),
                      Catch::Contains("on a ring, the nodes at even positions exchange with their right neighbour "
                                      "first"));
}

TEST_CASE("a node failing while its peer waits in an exchange aborts the run cleanly", "[collectives][groups]") {
  REQUIRE_THROWS_WITH(run_nodes(2, 2,
                                [&](int rank, exogym::sdk::Communicator& comm) {
                                  if (rank == 1) {
                                    std::this_thread::sleep_for(std::chrono::milliseconds(30));
                                    throw std::runtime_error("node 1 exploded");
                                  }
                                  comm.exchange(1, {at::ones({2})});
                                }),
                      "node 1 exploded");
}
