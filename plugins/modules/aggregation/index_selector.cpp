#include "exogym/modules/aggregation/index_selector.h"

#include <ATen/ATen.h>

#include <cmath>

#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::modules {

namespace {

// shared_generator streams, one per selector kind and parameter position.
// ("SPARTA" followed by a selector number.)
constexpr uint64_t kRandomStream = 0x5350415254410001ULL;
constexpr uint64_t kShuffledStream = 0x5350415254410002ULL;
constexpr uint64_t kPartitionedStream = 0x5350415254410003ULL;

uint64_t stream_of(uint64_t base, size_t param) { return base ^ (0x9E3779B97F4A7C15ULL * (param + 1)); }

int64_t ceil_inverse(double p) { return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(1.0 / p))); }

at::Tensor permutation(uint64_t seed, uint64_t stream, uint64_t step, int64_t numel) {
  return at::randperm(numel, sdk::shared_generator(seed, stream, step), at::TensorOptions().dtype(at::kLong));
}

at::Tensor no_indices() { return at::empty({0}, at::TensorOptions().dtype(at::kLong)); }

}  // namespace

at::Tensor RandomIndexSelector::select(size_t param, int64_t numel, int64_t call) {
  if (numel == 0) return no_indices();
  at::Tensor draws = at::empty({numel}, at::TensorOptions().dtype(at::kFloat));
  draws.bernoulli_(p_, sdk::shared_generator(seed_, stream_of(kRandomStream, param), static_cast<uint64_t>(call)));
  return at::nonzero(draws).flatten();
}

ShuffledSequentialIndexSelector::ShuffledSequentialIndexSelector(double p, uint64_t run_seed)
    : chunks_(ceil_inverse(p)), seed_(run_seed) {}

at::Tensor ShuffledSequentialIndexSelector::select(size_t param, int64_t numel, int64_t call) {
  if (numel == 0) return no_indices();
  auto it = permutations_.find(param);
  if (it == permutations_.end() || it->second.numel() != numel) {
    it = permutations_.insert_or_assign(param, permutation(seed_, stream_of(kShuffledStream, param), 0, numel)).first;
  }
  const int64_t c = call % chunks_;
  const int64_t base = numel / chunks_, larger = numel % chunks_;
  const int64_t start = c * base + std::min(c, larger);
  const int64_t size = base + (c < larger ? 1 : 0);
  return it->second.slice(0, start, start + size);
}

PartitionedIndexSelector::PartitionedIndexSelector(double p, uint64_t run_seed)
    : max_classes_(ceil_inverse(p)), seed_(run_seed) {}

int64_t PartitionedIndexSelector::classes(int64_t numel) const {
  return std::max<int64_t>(1, std::min(max_classes_, numel));
}

at::Tensor PartitionedIndexSelector::select(size_t param, int64_t numel, int64_t call) {
  if (numel == 0) return no_indices();
  // Every call returns one class of every parameter, so the call number says
  // which cycle (set of labels) and which class within it.
  const int64_t P = classes(numel);
  const int64_t cycle = call / P, label = call % P;
  Cycle& state = cycles_[param];
  if (state.index != cycle || state.permutation.numel() != numel) {
    state.index = cycle;
    state.permutation = permutation(seed_, stream_of(kPartitionedStream, param), static_cast<uint64_t>(cycle), numel);
  }
  // Label of the element at permutation position j is j mod P, so class
  // `label` is every P-th entry of the permutation.
  return state.permutation.slice(0, label, numel, P).contiguous();
}

const std::vector<std::string>& index_selector_names() {
  static const std::vector<std::string> names = {"random", "shuffled_sequential", "partitioned"};
  return names;
}

std::unique_ptr<IndexSelector> make_index_selector(const std::string& name, double p, uint64_t run_seed) {
  if (!(p > 0 && p <= 1)) throw sdk::ConfigError("p", "expected a fraction in (0, 1], got " + std::to_string(p));
  if (name == "random") return std::make_unique<RandomIndexSelector>(p, run_seed);
  if (name == "shuffled_sequential") return std::make_unique<ShuffledSequentialIndexSelector>(p, run_seed);
  if (name == "partitioned") return std::make_unique<PartitionedIndexSelector>(p, run_seed);
  throw sdk::ConfigError("selector",
                         "unknown index selector \"" + name + "\"; known: random, shuffled_sequential, partitioned");
}

}  // namespace exogym::modules
