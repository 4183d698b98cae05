// Label partitions (dirichlet, shards, labels), the sampler of nodes that own
// their examples, and reading labels from any dataset.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exogym/runtime/data/example_labels.h"
#include "exogym/runtime/data/label_partition.h"
#include "exogym/runtime/data/mnist.h"
#include "exogym/runtime/data/node_data.h"
#include "exogym/runtime/data/node_set_sampler.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "helpers.h"
#include "manifest_fixtures.h"
#include "testing.h"

using namespace exogym::runtime::data;
using Kind = PartitionSpec::Kind;

namespace {

std::vector<int64_t> mnist_labels() {
  static const std::vector<int64_t> labels = [] {
    const MnistDataset mnist(exogym::test::mnist_dir(), "train");
    const at::Tensor t = mnist.labels().contiguous();
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }();
  return labels;
}

// 1000 examples whose labels 0..9 come in uneven runs.
std::vector<int64_t> uneven_labels() {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 1000; ++i) labels.push_back((i * i / 7 + i / 100) % 10);
  return labels;
}

PartitionSpec dirichlet(double alpha) {
  PartitionSpec spec;
  spec.kind = Kind::Dirichlet;
  spec.alpha = alpha;
  return spec;
}

PartitionSpec shards(int64_t s) {
  PartitionSpec spec;
  spec.kind = Kind::Shards;
  spec.shards_per_node = s;
  return spec;
}

PartitionSpec label_sets(std::map<int, std::vector<int64_t>> sets) {
  PartitionSpec spec;
  spec.kind = Kind::Labels;
  spec.node_labels = std::move(sets);
  return spec;
}

// Every example in at most one node; returns how many were assigned.
size_t check_disjoint(const std::vector<std::vector<int64_t>>& nodes, size_t n) {
  std::vector<int> owners(n, 0);
  size_t assigned = 0;
  for (const auto& node : nodes) {
    REQUIRE(!node.empty());
    REQUIRE(std::is_sorted(node.begin(), node.end()));
    for (int64_t i : node) {
      REQUIRE(i >= 0);
      REQUIRE(i < static_cast<int64_t>(n));
      REQUIRE(++owners[i] == 1);
      ++assigned;
    }
  }
  return assigned;
}

std::map<int64_t, int64_t> histogram(const std::vector<int64_t>& examples, const std::vector<int64_t>& labels) {
  std::map<int64_t, int64_t> counts;
  for (int64_t i : examples) ++counts[labels[i]];
  return counts;
}

double mean_largest_fraction(const std::vector<std::vector<int64_t>>& nodes, const std::vector<int64_t>& labels) {
  double sum = 0;
  for (const auto& node : nodes) {
    int64_t most = 0;
    for (const auto& [label, count] : histogram(node, labels)) most = std::max(most, count);
    sum += static_cast<double>(most) / static_cast<double>(node.size());
  }
  return sum / static_cast<double>(nodes.size());
}

std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const exogym::sdk::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("label partitions assign every example to exactly one node, the same for the same seed", "[partition]") {
  const auto labels = uneven_labels();
  for (const auto& spec : {dirichlet(0.3), dirichlet(100), shards(3),
                           label_sets({{0, {0, 1, 2, 3}}, {1, {4, 5}}, {2, {6, 7, 8, 9}}, {3, {9, 0}}})}) {
    INFO(spec.name());
    const auto nodes = partition_by_label(spec, labels, 4, 11);
    REQUIRE(nodes.size() == 4);
    CHECK(check_disjoint(nodes, labels.size()) == labels.size());
    CHECK(partition_by_label(spec, labels, 4, 11) == nodes);
    if (spec.kind != Kind::Labels) CHECK(partition_by_label(spec, labels, 4, 12) != nodes);
  }
}

TEST_CASE("dirichlet: a large alpha gives IID label histograms, a small one a label per node", "[partition]") {
  const auto labels = mnist_labels();
  const auto overall = histogram(std::vector<int64_t>([&] {
                                   std::vector<int64_t> all(labels.size());
                                   for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
                                   return all;
                                 }()),
                                 labels);
  const auto iid = partition_by_label(dirichlet(1e4), labels, 10, 42);
  CHECK(check_disjoint(iid, labels.size()) == labels.size());
  for (const auto& node : iid) {
    CHECK(std::abs(static_cast<double>(node.size()) - 6000) < 300);
    for (const auto& [label, count] : histogram(node, labels)) {
      const double expected = static_cast<double>(overall.at(label)) / 60000;
      CHECK(std::abs(static_cast<double>(count) / static_cast<double>(node.size()) - expected) < 0.02);
    }
  }
  CHECK(mean_largest_fraction(iid, labels) < 0.13);
  const auto skewed = partition_by_label(dirichlet(0.05), labels, 10, 42);
  CHECK(check_disjoint(skewed, labels.size()) == labels.size());
  // Each label goes mostly to one node, but with 10 labels over 10 nodes some
  // nodes take most of two labels and others only slivers: 0.69 here (the
  // same algorithm in Python averages 0.72 over 30 seeds, 0.62 to 0.80).
  CHECK(mean_largest_fraction(skewed, labels) > 0.6);
}

TEST_CASE("dirichlet draws sum to one, even for tiny alphas, and follow the seed", "[partition]") {
  for (const double alpha : {0.001, 0.1, 1.0, 50.0}) {
    const auto p = dirichlet_draw(alpha, 8, 3);
    double sum = 0;
    for (double x : p) {
      CHECK(x >= 0);
      sum += x;
    }
    CHECK(sum == Approx(1.0));
    CHECK(dirichlet_draw(alpha, 8, 3) == p);
    CHECK(dirichlet_draw(alpha, 8, 4) != p);
  }
  // The mean of a coordinate is 1/k.
  double mean = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) mean += dirichlet_draw(0.5, 4, seed)[0] / 2000;
  CHECK(mean == Approx(0.25).margin(0.02));
}

TEST_CASE("shards: equal shards of the label-sorted examples, s per node", "[partition]") {
  const auto labels = mnist_labels();
  const auto nodes = partition_by_label(shards(2), labels, 10, 42);
  CHECK(check_disjoint(nodes, labels.size()) == labels.size());
  // 20 shards of 3,000 examples; every digit has more than 3,000, so a shard
  // spans at most 2 labels and a node at most 2 · 2.
  for (const auto& node : nodes) {
    CHECK(node.size() == 6000);
    CHECK(histogram(node, labels).size() <= 4);
  }
  CHECK(mean_largest_fraction(nodes, labels) > 0.5);
  // 7 nodes × 3 shards do not divide 60,000: shards differ by one example.
  const auto uneven = partition_by_label(shards(3), labels, 7, 1);
  CHECK(check_disjoint(uneven, labels.size()) == labels.size());
  for (const auto& node : uneven) CHECK((node.size() >= 3 * 2857 && node.size() <= 3 * 2858));
}

TEST_CASE("labels: each node gets exactly its labels, a shared label split evenly", "[partition]") {
  const auto labels = uneven_labels();
  const auto nodes = partition_by_label(label_sets({{0, {0, 1}}, {1, {2}}, {2, {2, 3}}}), labels, 3, 5);
  const std::vector<std::set<int64_t>> expected = {{0, 1}, {2}, {2, 3}};
  for (size_t r = 0; r < nodes.size(); ++r) {
    std::set<int64_t> seen;
    for (const auto& entry : histogram(nodes[r], labels)) seen.insert(entry.first);
    CHECK(seen == expected[r]);
  }
  int64_t twos = 0;
  for (int64_t l : labels) twos += l == 2;
  const int64_t one = histogram(nodes[1], labels).at(2), other = histogram(nodes[2], labels).at(2);
  CHECK(one + other == twos);
  CHECK(std::abs(one - other) <= 1);
  // Labels no node lists (4 to 9) are left out.
  int64_t listed = 0;
  for (int64_t l : labels) listed += l <= 3;
  CHECK(check_disjoint(nodes, labels.size()) == static_cast<size_t>(listed));
}

TEST_CASE("label partition errors name the key at fault", "[partition]") {
  const auto labels = uneven_labels();
  CHECK(config_error_of([&] {
          partition_by_label(label_sets({{0, {0}}, {1, {12}}}), labels, 2, 1);
        }) == "data.train.partition.nodes.1: label 12 has no example in the training set");
  CHECK(config_error_of([&] { partition_by_label(shards(300), labels, 4, 1); }) ==
        "data.train.partition.shards_per_node: 4 nodes × 300 shards = 1200 shards, more than the 1000 training "
        "examples");
  // Two examples of one label cannot feed three nodes.
  const std::vector<int64_t> tiny = {0, 0};
  CHECK(config_error_of([&] {
          partition_by_label(label_sets({{0, {0}}, {1, {0}}, {2, {0}}}), tiny, 3, 1);
        }) == "data.train.partition.nodes.0: leaves node 0 without any example");
  CHECK_THAT(config_error_of([&] { partition_by_label(dirichlet(0.001), tiny, 3, 1); }),
             Catch::StartsWith("data.train.partition.alpha: alpha = 0.001 over 3 nodes left node "));
}

TEST_CASE("NodeSetSampler: each node streams through its own epochs, a pure function of node and step", "[partition]") {
  const NodeSetSampler sampler({{10, 11, 12, 13, 14, 15, 16, 17}, {20, 21, 22}}, 4, 9);
  // Node 0: two steps are one epoch, a permutation of its examples.
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<int64_t> seen;
    for (int64_t t = 2 * epoch; t < 2 * epoch + 2; ++t)
      for (int64_t i : sampler.batch_indices(0, t)) seen.insert(i);
    CHECK(seen == std::multiset<int64_t>{10, 11, 12, 13, 14, 15, 16, 17});
  }
  // Node 1 has fewer examples than a batch: 12 positions are 4 epochs of 3.
  std::multiset<int64_t> seen;
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t i : sampler.batch_indices(1, t)) seen.insert(i);
  CHECK(seen == std::multiset<int64_t>{20, 20, 20, 20, 21, 21, 21, 21, 22, 22, 22, 22});
  // Asked out of order, by another instance: the same batches.
  const NodeSetSampler again({{10, 11, 12, 13, 14, 15, 16, 17}, {20, 21, 22}}, 4, 9);
  for (int64_t t = 9; t >= 0; --t) {
    CHECK(again.batch_indices(1, t) == sampler.batch_indices(1, t));
    CHECK(again.batch_indices(0, t) == sampler.batch_indices(0, t));
  }
  CHECK(sampler.node_examples(1) == std::vector<int64_t>{20, 21, 22});
  CHECK(sampler.steps_per_epoch() == 2);
}

TEST_CASE("example_labels reads labels through get(), and none from sequence targets", "[partition]") {
  const auto mnist = make_builtin_dataset("mnist", nlohmann::json::object(), {exogym::test::mnist_dir(), "test"});
  // MNIST hands its labels over (KnownLabels); a plugin's dataset, which
  // only has get(), gives the same labels through a pass of get().
  REQUIRE(dynamic_cast<const KnownLabels*>(mnist.get()));
  struct OnlyGet : exogym::sdk::Dataset {
    const exogym::sdk::Dataset& inner;
    explicit OnlyGet(const exogym::sdk::Dataset& d) : inner(d) {}
    int64_t size() const override { return inner.size(); }
    exogym::sdk::Batch get(const std::vector<int64_t>& indices) const override { return inner.get(indices); }
  };
  const auto labels = example_labels(*mnist);
  REQUIRE(labels);
  REQUIRE(labels->size() == 10000);
  CHECK(std::count(labels->begin(), labels->end(), 0) == 980);  // the published count of zeros in t10k
  CHECK(example_labels(OnlyGet(*mnist)) == labels);
  exogym::test::TempDir dir("labels-text");
  { std::ofstream(dir / "t.txt") << "hello world, hello again\n"; }
  const auto options = exogym::sdk::validate_options({{"block_size", 4}, {"vocabulary", "file"}},
                                                     *builtin_dataset_options("text-char"), "options");
  const auto text = make_builtin_dataset("text-char", options, {dir / "t.txt", "train"});
  CHECK_FALSE(example_labels(*text));
}

TEST_CASE("node_data counts each node's labels, and label_skew is the mean largest fraction", "[partition]") {
  const std::vector<int64_t> labels = {0, 0, 1, 1, 1, 2};
  const NodeSetSampler sampler({{0, 1, 2}, {3, 4, 5}}, 2, 1);
  std::vector<NodeData> nodes = {node_data(sampler, 0, &labels), node_data(sampler, 1, &labels)};
  CHECK(nodes[0].examples == 3);
  CHECK(nodes[0].label_counts == std::map<int64_t, int64_t>{{0, 2}, {1, 1}});
  CHECK(nodes[1].label_counts == std::map<int64_t, int64_t>{{1, 2}, {2, 1}});
  CHECK(*label_skew(nodes) == Approx(2.0 / 3));
  CHECK_FALSE(label_skew({node_data(sampler, 0, nullptr)}));
}

TEST_CASE("manifest: partition objects are declared, resolved and their errors name the key", "[partition][manifest]") {
  namespace fixtures = exogym::test::manifest;
  using nlohmann::json;
  const auto partition_error = [](const json& partition, int nodes = 2) {
    return fixtures::error_with({{"nodes", nodes}, {"data", {{"train", {{"partition", partition}}}}}}).what;
  };
  {
    json doc = fixtures::minimal();
    doc["nodes"] = 3;
    doc["data"]["train"]["partition"] = {{"name", "labels"}, {"nodes", {{"0", {0, 1}}, {"1", {2}}, {"2", {2, 3}}}}};
    const auto m = fixtures::parse_one(doc);
    CHECK(m.train_data.partition.kind == Kind::Labels);
    CHECK(m.train_data.partition.node_labels.at(2) == std::vector<int64_t>{2, 3});
    doc["data"]["train"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.1}};
    const auto d = fixtures::parse_one(doc);
    CHECK(d.train_data.partition.kind == Kind::Dirichlet);
    CHECK(d.train_data.partition.alpha == 0.1);
    CHECK(d.resolved["data"]["train"]["partition"] == json{{"name", "dirichlet"}, {"alpha", 0.1}});
    // A name stays a name in config.json.
    doc["data"]["train"]["partition"] = "contiguous";
    CHECK(fixtures::parse_one(doc).resolved["data"]["train"]["partition"] == "contiguous");
  }
  CHECK(partition_error({{"name", "dirichlet"}, {"alpha", 0}}) ==
        "data.train.partition.alpha: expected a positive number, got 0");
  CHECK(partition_error({{"name", "dirichlet"}, {"alpha", -1}}) ==
        "data.train.partition.alpha: expected a positive number, got -1");
  CHECK_THAT(partition_error("dirichlet"),
             Catch::StartsWith("data.train.partition: \"dirichlet\" needs \"alpha\" (the concentration"));
  CHECK_THAT(partition_error({{"name", "dirichlet"}}),
             Catch::StartsWith("data.train.partition.alpha: required option missing (a positive number"));
  CHECK_THAT(
      partition_error({{"name", "shard"}, {"shards_per_node", 2}}),
      Catch::Contains("data.train.partition.name: expected one of") && Catch::Contains("did you mean \"shards\"?"));
  CHECK(partition_error({{"name", "shards"}, {"shards_per_node", 0}}) ==
        "data.train.partition.shards_per_node: expected a positive integer, got 0");
  CHECK_THAT(partition_error({{"name", "shards"}, {"shards", 2}}),
             Catch::StartsWith("data.train.partition.shards: unknown option; did you mean \"shards_per_node\"?"));
  CHECK(partition_error({{"name", "labels"}, {"nodes", {{"0", {0}}, {"5", {1}}}}}) ==
        "data.train.partition.nodes.5: node 5 does not exist: the run has 2 nodes (0 to 1)");
  CHECK(partition_error({{"name", "labels"}, {"nodes", {{"0", {0}}}}}) ==
        "data.train.partition.nodes: node 1 has no labels: list the labels of every node, \"0\" to \"1\"");
  CHECK(partition_error({{"name", "labels"}, {"nodes", {{"0", {0}}, {"1", json::array()}}}}) ==
        "data.train.partition.nodes.1: an empty list leaves the node without any example");
  CHECK(partition_error({{"name", "labels"}, {"nodes", {{"0", {0}}, {"1", {"a"}}}}}) ==
        "data.train.partition.nodes.1[0]: expected an integer, got \"a\"");
}
