// SPARTA's index selectors: fractions, coverage per cycle, and the same
// selection on every node for a seed, parameter and call.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "exogym/modules/aggregation/index_selector.h"
#include "testing.h"

namespace modules = exogym::modules;

namespace {

std::set<int64_t> as_set(const at::Tensor& indices) {
  std::set<int64_t> out;
  auto contiguous = indices.contiguous();
  for (int64_t i = 0; i < contiguous.numel(); ++i) out.insert(contiguous.data_ptr<int64_t>()[i]);
  return out;
}

}  // namespace

TEST_CASE("the random selector picks a fraction p, the same on every node for a seed and call", "[strategies]") {
  const int64_t n = 100000;
  const double p = 0.01;
  modules::RandomIndexSelector a(p, 42), b(p, 42), other_seed(p, 43);
  at::Tensor first = a.select(0, n, 5);
  // Count within 5 sigma of n p = 1000 (sigma = sqrt(n p (1 - p)) = 31.5).
  const double sigma = std::sqrt(n * p * (1 - p));
  CHECK(std::abs(static_cast<double>(first.numel()) - n * p) < 5 * sigma);
  CHECK(first.scalar_type() == at::kLong);
  CHECK(first.min().item<int64_t>() >= 0);
  CHECK(first.max().item<int64_t>() < n);
  CHECK(static_cast<int64_t>(as_set(first).size()) == first.numel());  // no repeats
  // Same seed, parameter and call: same selection, on another instance too.
  CHECK(at::equal(first, b.select(0, n, 5)));
  CHECK(at::equal(first, a.select(0, n, 5)));
  // Fresh draws per call, per parameter and per seed.
  CHECK_FALSE(at::equal(first, a.select(0, n, 6)));
  CHECK_FALSE(at::equal(first, a.select(1, n, 5)));
  CHECK_FALSE(at::equal(first, other_seed.select(0, n, 5)));
  // Over 20 calls every element is picked about 20 p = 0.2 times: the draws
  // are independent, not one fixed set.
  at::Tensor hits = at::zeros({n}, at::kLong);
  for (int64_t call = 0; call < 20; ++call) {
    at::Tensor picked = a.select(0, n, call);
    hits.index_add_(0, picked, at::ones({picked.numel()}, at::kLong));
  }
  const double total = hits.sum().item<double>();
  CHECK(std::abs(total - 20 * n * p) < 5 * std::sqrt(20 * n * p));
  CHECK(hits.gt(0).sum().item<int64_t>() > 15000);  // 1 - 0.99^20 = 18% of elements
  CHECK(a.select(0, 0, 0).numel() == 0);
}

TEST_CASE("the shuffled sequential selector covers each element exactly once per cycle of P calls", "[strategies]") {
  // p = 0.3: P = ceil(1/0.3) = 4 chunks; 10 elements split 3, 3, 2, 2.
  modules::ShuffledSequentialIndexSelector selector(0.3, 42), twin(0.3, 42);
  REQUIRE(selector.chunks() == 4);
  const int64_t n = 10;
  std::vector<int64_t> sizes;
  std::multiset<int64_t> covered;
  for (int64_t call = 0; call < 4; ++call) {
    at::Tensor chunk = selector.select(0, n, call);
    sizes.push_back(chunk.numel());
    for (auto i : as_set(chunk)) covered.insert(i);
    CHECK(at::equal(chunk, twin.select(0, n, call)));
  }
  CHECK(sizes == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(covered.size() == 10);
  CHECK(std::set<int64_t>(covered.begin(), covered.end()).size() == 10);
  CHECK(*covered.begin() == 0);
  CHECK(*covered.rbegin() == 9);
  // The permutation is fixed: the next cycle repeats the first.
  for (int64_t call = 0; call < 4; ++call)
    CHECK(at::equal(selector.select(0, n, call), selector.select(0, n, call + 4)));
  // It is random, not the identity order.
  at::Tensor order = at::cat({selector.select(0, 1000, 0), selector.select(0, 1000, 1), selector.select(0, 1000, 2),
                              selector.select(0, 1000, 3)});
  CHECK_FALSE(at::equal(order, at::arange(1000, at::kLong)));
  CHECK(as_set(order).size() == 1000);
  // Fewer elements than chunks: some chunks are empty; an empty parameter selects nothing.
  CHECK(selector.select(1, 2, 0).numel() == 1);
  CHECK(selector.select(1, 2, 3).numel() == 0);
  CHECK(selector.select(2, 0, 0).numel() == 0);
}

TEST_CASE("the partitioned selector covers each element once per cycle, then draws new classes", "[strategies]") {
  // p = 0.25: P = 4 classes; 10 elements give classes of 3, 3, 2, 2.
  modules::PartitionedIndexSelector selector(0.25, 42), twin(0.25, 42);
  const int64_t n = 10;
  REQUIRE(selector.classes(n) == 4);
  REQUIRE(selector.classes(3) == 3);  // never more classes than elements
  std::vector<std::set<int64_t>> cycle1, cycle2;
  for (int64_t call = 0; call < 8; ++call) {
    at::Tensor cls = selector.select(0, n, call);
    CHECK(at::equal(cls, twin.select(0, n, call)));
    (call < 4 ? cycle1 : cycle2).push_back(as_set(cls));
  }
  for (const auto* cycle : {&cycle1, &cycle2}) {
    std::multiset<int64_t> covered;
    std::vector<size_t> sizes;
    for (const auto& cls : *cycle) {
      covered.insert(cls.begin(), cls.end());
      sizes.push_back(cls.size());
    }
    std::sort(sizes.begin(), sizes.end());
    CHECK(sizes == std::vector<size_t>{2, 2, 3, 3});
    CHECK(covered.size() == 10);
    CHECK(std::set<int64_t>(covered.begin(), covered.end()).size() == 10);
  }
  // The second cycle's classes are a new draw.
  CHECK(std::set<std::set<int64_t>>(cycle1.begin(), cycle1.end()) !=
        std::set<std::set<int64_t>>(cycle2.begin(), cycle2.end()));
  CHECK(selector.select(1, 0, 0).numel() == 0);
  modules::PartitionedIndexSelector one(1.0, 42);
  CHECK(one.select(0, n, 3).numel() == n);  // p = 1: one class, every element
}
