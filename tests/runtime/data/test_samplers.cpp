// The IID sampler (the reference's DistributedSampler over K nodes) and the
// validation subset.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randperm.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "exogym/runtime/data/sampler.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "testing.h"

using namespace exogym::runtime::data;
using Catch::Contains;
using exogym::sdk::ConfigError;
using exogym::test::to_vector;

namespace {}  // namespace

TEST_CASE("IidSampler: node batches at a step are the K=1 big batch, split every K-th", "[data]") {
  const int64_t n = 1000;
  const IidSampler four(n, 4, 8, 42);
  const IidSampler one(n, 1, 32, 42);
  REQUIRE(four.steps_per_epoch() == 31);
  REQUIRE(one.steps_per_epoch() == 31);
  for (int64_t step : {0, 1, 17, 30, 31, 45, 100}) {
    INFO("step " << step);
    const auto big = one.batch_indices(0, step);
    std::vector<int64_t> all;
    for (int r = 0; r < 4; ++r) {
      const auto batch = four.batch_indices(r, step);
      REQUIRE(batch.size() == 8);
      // Node r takes every 4th index of the big batch, starting at r.
      for (int k = 0; k < 8; ++k) REQUIRE(batch[k] == big[r + 4 * k]);
      all.insert(all.end(), batch.begin(), batch.end());
    }
    // Disjoint: the union has K·B distinct indices.
    REQUIRE(std::set<int64_t>(all.begin(), all.end()).size() == 32);
    auto sorted_big = big;
    std::sort(all.begin(), all.end());
    std::sort(sorted_big.begin(), sorted_big.end());
    REQUIRE(all == sorted_big);
  }
}

TEST_CASE("IidSampler: follows the epoch permutation, which ignores K and B", "[data]") {
  const int64_t n = 1000;
  const IidSampler sampler(n, 4, 8, 7);
  REQUIRE(sampler.epoch_of(0) == 0);
  REQUIRE(sampler.epoch_of(30) == 0);
  REQUIRE(sampler.epoch_of(31) == 1);
  REQUIRE(sampler.epoch_of(62) == 2);

  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto perm = IidSampler::permutation(n, 7, epoch);
    REQUIRE(perm.size() == n);
    REQUIRE(std::set<int64_t>(perm.begin(), perm.end()).size() == n);
    REQUIRE(*std::min_element(perm.begin(), perm.end()) == 0);
    REQUIRE(*std::max_element(perm.begin(), perm.end()) == n - 1);
    // Every one of the epoch's first steps_per_epoch·K·B positions is used
    // exactly once, by the documented node and slot.
    std::vector<int> uses(n, 0);
    for (int64_t s = 0; s < sampler.steps_per_epoch(); ++s) {
      for (int r = 0; r < 4; ++r) {
        const auto batch = sampler.batch_indices(r, epoch * sampler.steps_per_epoch() + s);
        for (int k = 0; k < 8; ++k) {
          REQUIRE(batch[k] == perm[s * 32 + r + 4 * k]);
          ++uses[batch[k]];
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) REQUIRE(uses[perm[i]] == (i < 31 * 32 ? 1 : 0));
  }

  // A different permutation each epoch.
  REQUIRE(IidSampler::permutation(n, 7, 0) != IidSampler::permutation(n, 7, 1));
  REQUIRE(sampler.batch_indices(0, 0) != sampler.batch_indices(0, 31));
  // A different seed gives a different order.
  REQUIRE(IidSampler::permutation(n, 7, 0) != IidSampler::permutation(n, 8, 0));
  // The permutation is randperm from a CPU generator seeded with seed + epoch,
  // as torch's DistributedSampler after set_epoch(epoch).
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7 + 2);
  REQUIRE(to_vector(at::randperm(n, generator, at::kLong)) == IidSampler::permutation(n, 7, 2));

  // Independent of K and B: a single node with batch 1 walks the permutation.
  const IidSampler single(n, 1, 1, 7);
  const auto perm0 = IidSampler::permutation(n, 7, 0);
  for (int64_t t = 0; t < 50; ++t) REQUIRE(single.batch_indices(0, t) == std::vector<int64_t>{perm0[t]});
  const IidSampler odd(n, 3, 5, 7);
  for (int r = 0; r < 3; ++r) {
    const auto batch = odd.batch_indices(r, 2);
    for (int k = 0; k < 5; ++k) REQUIRE(batch[k] == perm0[2 * 15 + r + 3 * k]);
  }
}

TEST_CASE("IidSampler: deterministic across instances and microbatches are slices", "[data]") {
  const IidSampler a(60000, 8, 64, 42);
  const IidSampler b(60000, 8, 64, 42);
  for (int64_t step : {0, 5, 116, 117, 500}) {
    for (int r = 0; r < 8; ++r) REQUIRE(a.batch_indices(r, step) == b.batch_indices(r, step));
  }
  // Asking out of order (an epoch evicted from the cache and recomputed)
  // gives the same answer.
  const auto early = a.batch_indices(3, 1);
  for (int64_t step = 0; step < 20 * a.steps_per_epoch(); step += a.steps_per_epoch()) a.batch_indices(0, step);
  REQUIRE(a.batch_indices(3, 1) == early);

  // Microbatch j (size 16) of node r's batch is its slice [16·j, 16·(j+1)),
  // i.e. permutation positions s·K·B + r + K·(16·j + i).
  const auto perm = IidSampler::permutation(60000, 42, 0);
  const auto batch = a.batch_indices(5, 3);
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 16; ++i) REQUIRE(batch[j * 16 + i] == perm[3 * 8 * 64 + 5 + 8 * (j * 16 + i)]);
  }
}

TEST_CASE("IidSampler: many threads get the sequential answers", "[data]") {
  const int nodes = 16;
  const int64_t steps = 3 * IidSampler(5000, nodes, 16, 3).steps_per_epoch() + 2;  // crosses epoch boundaries
  const IidSampler reference(5000, nodes, 16, 3);
  std::vector<std::vector<std::vector<int64_t>>> expected(nodes);
  for (int r = 0; r < nodes; ++r) {
    for (int64_t t = 0; t < steps; ++t) expected[r].push_back(reference.batch_indices(r, t));
  }

  const IidSampler shared(5000, nodes, 16, 3);
  std::vector<std::vector<std::vector<int64_t>>> got(nodes);
  std::vector<std::thread> threads;
  for (int r = 0; r < nodes; ++r) {
    threads.emplace_back([&, r] {
      // Odd ranks walk backwards so that threads sit in different epochs.
      for (int64_t i = 0; i < steps; ++i) got[r].push_back(shared.batch_indices(r, r % 2 ? steps - 1 - i : i));
      if (r % 2) std::reverse(got[r].begin(), got[r].end());
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(got == expected);
}

TEST_CASE("IidSampler: K = 1024 nodes", "[data]") {
  const IidSampler sampler(60000, 1024, 8, 1);
  REQUIRE(sampler.steps_per_epoch() == 7);
  std::vector<int64_t> all;
  for (int r = 0; r < 1024; ++r) {
    const auto batch = sampler.batch_indices(r, 6);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  REQUIRE(std::set<int64_t>(all.begin(), all.end()).size() == 8192);
}

TEST_CASE("IidSampler: nodes H steps apart share each epoch's permutation, even when an epoch is one step", "[data]") {
  // 4,096 nodes of 8 on MNIST: one step per epoch. Between DiLoCo's outer
  // steps (H = 10) the nodes drift up to 10 steps, i.e. 10 epochs, apart:
  // here node r runs step t while node 0 is 9 steps behind.
  IidSampler sampler(60000, 4096, 8, 5);
  REQUIRE(sampler.steps_per_epoch() == 1);
  for (int64_t t = 9; t < 40; ++t) {
    for (int rank = 0; rank < 4096; rank += 512) {
      sampler.batch_indices(rank, t);
      sampler.batch_indices(0, t - 9);
    }
  }
  REQUIRE(sampler.permutations_computed() == 40);
}

TEST_CASE("IidSampler: errors", "[data]") {
  REQUIRE_THROWS_AS(IidSampler(100, 4, 32, 0), ConfigError);
  REQUIRE_THROWS_WITH(IidSampler(100, 4, 32, 0), Contains("train.batch_size") &&
                                                     Contains("the training set has 100 examples") &&
                                                     Contains("4 × 32 = 128"));
  REQUIRE_NOTHROW(IidSampler(128, 4, 32, 0));
  const IidSampler sampler(128, 4, 32, 0);
  REQUIRE_THROWS_AS(sampler.batch_indices(4, 0), exogym::sdk::InternalError);
  REQUIRE_THROWS_AS(sampler.batch_indices(0, -1), exogym::sdk::InternalError);
  REQUIRE_THROWS_AS(IidSampler(128, 0, 32, 0), exogym::sdk::InternalError);
}

TEST_CASE("validation_indices: a fixed subset", "[data]") {
  const auto a = validation_indices(10000, 1024);
  REQUIRE(a.size() == 1024);
  REQUIRE(std::set<int64_t>(a.begin(), a.end()).size() == 1024);
  REQUIRE(*std::max_element(a.begin(), a.end()) < 10000);
  REQUIRE(*std::min_element(a.begin(), a.end()) >= 0);
  REQUIRE(validation_indices(10000, 1024) == a);
  // A random subset, not the first examples (files are often sorted).
  REQUIRE(*std::max_element(a.begin(), a.end()) > 5000);
  // A smaller size is a prefix of the same permutation.
  const auto small = validation_indices(10000, 10);
  REQUIRE(std::equal(small.begin(), small.end(), a.begin()));
  REQUIRE(validation_indices(10000, 10000).size() == 10000);
  REQUIRE(validation_indices(10, 0).empty());
  REQUIRE_THROWS_AS(validation_indices(10000, 10001), ConfigError);
  REQUIRE_THROWS_WITH(validation_indices(10000, 10001),
                      Contains("eval.size") && Contains("10001") && Contains("10000"));
}
