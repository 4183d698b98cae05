#pragma once
// Which elements of each parameter SPARTA averages at a call. Every selector
// is a deterministic function of (run seed, parameter position, call), so
// every node selects the same elements without communicating anything (the
// reference broadcast rank 0's full-size bool mask every step). A selector
// caches permutations between calls: one per node, used by its thread.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace exogym::modules {

class IndexSelector {
 public:
  virtual ~IndexSelector() = default;
  // Flat int64 indices (CPU) into parameter number `param` (numel elements)
  // to average at call number `call` (SpartaModule: step / interval).
  virtual at::Tensor select(size_t param, int64_t numel, int64_t call) = 0;
};

// i.i.d. Bernoulli(p) per element, drawn fresh at every call: about p * numel
// elements, a random number.
class RandomIndexSelector final : public IndexSelector {
 public:
  RandomIndexSelector(double p, uint64_t run_seed) : p_(p), seed_(run_seed) {}
  at::Tensor select(size_t param, int64_t numel, int64_t call) override;

 private:
  double p_;
  uint64_t seed_;
};

// One fixed random permutation per parameter, cut into P = max(1, ceil(1/p))
// chunks (the first numel mod P one element larger); call c selects chunk
// c mod P, so every element is averaged exactly once per P calls.
class ShuffledSequentialIndexSelector final : public IndexSelector {
 public:
  ShuffledSequentialIndexSelector(double p, uint64_t run_seed);
  at::Tensor select(size_t param, int64_t numel, int64_t call) override;
  int64_t chunks() const { return chunks_; }

 private:
  int64_t chunks_;
  uint64_t seed_;
  std::map<size_t, at::Tensor> permutations_;
};

// Balanced random classes: P = max(1, min(ceil(1/p), numel)); element labels
// are their position in a random permutation mod P. Calls return classes
// 0, 1, ..., P-1 in turn; then the next cycle draws new labels.
class PartitionedIndexSelector final : public IndexSelector {
 public:
  PartitionedIndexSelector(double p, uint64_t run_seed);
  at::Tensor select(size_t param, int64_t numel, int64_t call) override;
  // The number of classes of a parameter with `numel` elements.
  int64_t classes(int64_t numel) const;

 private:
  struct Cycle {
    int64_t index = -1;
    at::Tensor permutation;
  };
  int64_t max_classes_;
  uint64_t seed_;
  std::map<size_t, Cycle> cycles_;
};

// "random", "shuffled_sequential" or "partitioned".
std::unique_ptr<IndexSelector> make_index_selector(const std::string& name, double p, uint64_t run_seed);
const std::vector<std::string>& index_selector_names();

}  // namespace exogym::modules
