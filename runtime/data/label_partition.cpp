#include "exogym/runtime/data/label_partition.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::data {

namespace {

// Streams of sdk::derive_seed, one per partition ("DIRICH", "SHARDS", "LABELS").
constexpr uint64_t kDirichletStream = 0x444952494348;
constexpr uint64_t kShardsStream = 0x534841524453;
constexpr uint64_t kLabelsStream = 0x4c4142454c53;

// Random numbers that are the same with every standard library: mt19937_64
// is specified bit for bit, the <random> distributions are not, so the
// distributions are written out here.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}

  // Uniform in (0, 1).
  double uniform() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53; }

  // Uniform in [0, n), without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = engine_();
    while (x >= limit);
    return x % n;
  }

  double normal() { return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform()); }

  // log of a Gamma(alpha, 1) draw: Marsaglia and Tsang (2000) for alpha >= 1,
  // and Gamma(alpha) = Gamma(alpha + 1)·U^(1/alpha) below, kept in log space.
  double log_gamma(double alpha) {
    if (alpha < 1) return log_gamma(alpha + 1) + std::log(uniform()) / alpha;
    const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      const double x = normal(), v = std::pow(1 + c * x, 3);
      if (v <= 0) continue;
      if (std::log(uniform()) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d * v);
    }
  }

  template <class T>
  void shuffle(std::vector<T>& items) {  // Fisher-Yates
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

std::vector<double> dirichlet(double alpha, int k, Random& random) {
  std::vector<double> logs(static_cast<size_t>(k));
  for (auto& x : logs) x = random.log_gamma(alpha);
  const double top = *std::max_element(logs.begin(), logs.end());
  double sum = 0;
  for (auto& x : logs) sum += (x = std::exp(x - top));
  for (auto& x : logs) x /= sum;
  return logs;
}

// Each label's examples, ascending, by label.
std::map<int64_t, std::vector<int64_t>> by_label(const std::vector<int64_t>& labels) {
  std::map<int64_t, std::vector<int64_t>> out;
  for (size_t i = 0; i < labels.size(); ++i) out[labels[i]].push_back(static_cast<int64_t>(i));
  return out;
}

// The first node without examples, or -1.
int empty_node(const std::vector<std::vector<int64_t>>& nodes) {
  for (size_t r = 0; r < nodes.size(); ++r)
    if (nodes[r].empty()) return static_cast<int>(r);
  return -1;
}

// items [⌊i·n/parts⌋, ⌊(i+1)·n/parts⌋) for part i: sizes differ by at most one.
int64_t cut(int64_t i, int64_t n, int64_t parts) { return static_cast<int64_t>(static_cast<__int128>(i) * n / parts); }

std::vector<std::vector<int64_t>> dirichlet_partition(const PartitionSpec& spec, const std::vector<int64_t>& labels,
                                                      int k, uint64_t seed) {
  const auto classes = by_label(labels);
  Random random(sdk::derive_seed(seed, kDirichletStream));
  // A draw with a tiny alpha can leave a node without any example; redraw,
  // as common implementations do (they ask for a minimum size).
  constexpr int kDraws = 100;
  std::vector<std::vector<int64_t>> nodes;
  for (int attempt = 0; attempt < kDraws; ++attempt) {
    nodes.assign(static_cast<size_t>(k), {});
    for (auto [label, examples] : classes) {
      random.shuffle(examples);
      const std::vector<double> p = dirichlet(spec.alpha, k, random);
      const auto n = static_cast<double>(examples.size());
      double cumulative = 0;
      size_t begin = 0;
      for (int r = 0; r < k; ++r) {
        cumulative += p[r];
        const size_t end =
            r + 1 == k ? examples.size() : std::min(examples.size(), static_cast<size_t>(n * cumulative));
        nodes[r].insert(nodes[r].end(), examples.begin() + begin, examples.begin() + std::max(begin, end));
        begin = std::max(begin, end);
      }
    }
    if (empty_node(nodes) < 0) return nodes;
  }
  throw sdk::ConfigError(spec.json_path + ".alpha", "alpha = " + sdk::json_excerpt(spec.alpha) + " over " +
                                                        std::to_string(k) + " nodes left node " +
                                                        std::to_string(empty_node(nodes)) +
                                                        " without any example in each of " + std::to_string(kDraws) +
                                                        " draws: raise alpha or use fewer nodes");
}

std::vector<std::vector<int64_t>> shards_partition(const PartitionSpec& spec, const std::vector<int64_t>& labels, int k,
                                                   uint64_t seed) {
  const int64_t n = static_cast<int64_t>(labels.size());
  const int64_t shards = spec.shards_per_node * k;
  if (shards > n) {
    throw sdk::ConfigError(spec.json_path + ".shards_per_node",
                           std::to_string(k) + " nodes × " + std::to_string(spec.shards_per_node) +
                               " shards = " + std::to_string(shards) + " shards, more than the " + std::to_string(n) +
                               " training examples");
  }
  std::vector<int64_t> sorted(static_cast<size_t>(n));
  std::iota(sorted.begin(), sorted.end(), 0);
  std::stable_sort(sorted.begin(), sorted.end(), [&](int64_t a, int64_t b) { return labels[a] < labels[b]; });
  std::vector<int64_t> order(static_cast<size_t>(shards));
  std::iota(order.begin(), order.end(), 0);
  Random(sdk::derive_seed(seed, kShardsStream)).shuffle(order);
  std::vector<std::vector<int64_t>> nodes(static_cast<size_t>(k));
  for (int64_t i = 0; i < shards; ++i) {
    const int64_t shard = order[i];
    auto& node = nodes[i / spec.shards_per_node];
    node.insert(node.end(), sorted.begin() + cut(shard, n, shards), sorted.begin() + cut(shard + 1, n, shards));
  }
  return nodes;
}

std::vector<std::vector<int64_t>> labels_partition(const PartitionSpec& spec, const std::vector<int64_t>& labels, int k,
                                                   uint64_t seed) {
  auto classes = by_label(labels);
  std::map<int64_t, std::vector<int>> holders;  // label -> the nodes listing it, ascending
  for (const auto& [node, wanted] : spec.node_labels) {
    for (int64_t label : wanted) {
      if (!classes.count(label)) {
        throw sdk::ConfigError(spec.json_path + ".nodes." + std::to_string(node),
                               "label " + std::to_string(label) + " has no example in the training set");
      }
      auto& list = holders[label];
      if (list.empty() || list.back() != node) list.push_back(node);
    }
  }
  Random random(sdk::derive_seed(seed, kLabelsStream));
  std::vector<std::vector<int64_t>> nodes(static_cast<size_t>(k));
  for (const auto& [label, list] : holders) {
    auto& examples = classes.at(label);
    random.shuffle(examples);
    const auto n = static_cast<int64_t>(examples.size()), parts = static_cast<int64_t>(list.size());
    for (int64_t i = 0; i < parts; ++i) {
      auto& node = nodes[list[i]];
      node.insert(node.end(), examples.begin() + cut(i, n, parts), examples.begin() + cut(i + 1, n, parts));
    }
  }
  return nodes;
}

}  // namespace

std::vector<double> dirichlet_draw(double alpha, int k, uint64_t seed) {
  Random random(seed);
  return dirichlet(alpha, k, random);
}

std::vector<std::vector<int64_t>> partition_by_label(const PartitionSpec& spec, const std::vector<int64_t>& labels,
                                                     int num_nodes, uint64_t seed) {
  std::vector<std::vector<int64_t>> nodes;
  switch (spec.kind) {
    case PartitionSpec::Kind::Dirichlet:
      nodes = dirichlet_partition(spec, labels, num_nodes, seed);
      break;
    case PartitionSpec::Kind::Shards:
      nodes = shards_partition(spec, labels, num_nodes, seed);
      break;
    case PartitionSpec::Kind::Labels:
      nodes = labels_partition(spec, labels, num_nodes, seed);
      break;
    default:
      EXOGYM_CHECK_INTERNAL(false, std::string("partition_by_label: \"") + spec.name() + "\" is not by label");
  }
  if (const int r = empty_node(nodes); r >= 0) {
    const std::string where = spec.kind == PartitionSpec::Kind::Labels ? ".nodes." + std::to_string(r) : "";
    throw sdk::ConfigError(spec.json_path + where, "leaves node " + std::to_string(r) + " without any example");
  }
  for (auto& node : nodes) std::sort(node.begin(), node.end());
  return nodes;
}

}  // namespace exogym::runtime::data
