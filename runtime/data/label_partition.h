#pragma once
// Label-skewed partitions: each node gets a fixed set of examples chosen by
// their integer labels, the non-IID settings of the federated-learning
// literature. Every example goes to at most one node ("labels" leaves out
// the labels no node lists; the others assign every example), and the
// partition depends only on the labels, the node count, the spec and the
// seed: every process of a run computes the same one.
#include <cstdint>
#include <vector>

#include "exogym/runtime/data/partition.h"

namespace exogym::runtime::data {

// Each node's examples (dataset indices, ascending) under `spec`, which must
// be a label partition. `labels[i]` is example i's label.
//  - dirichlet: for each label, its examples (shuffled) are cut among the
//    nodes in proportions drawn from Dir(alpha, ..., alpha) (Hsu, Qi and
//    Brown, 2019). A draw leaving a node without any example is redrawn.
//  - shards: the examples sorted by label (then index) are cut into K·s
//    shards of equal size (±1 example), and each node gets s of them chosen
//    at random (McMahan et al., 2017).
//  - labels: node r gets the examples of the labels it lists; a label
//    listed by several nodes is split evenly among them at random.
// Throws sdk::ConfigError naming spec.json_path (or the key at fault) when a
// node would get no example, a listed label has no example, or there are
// more shards than examples.
std::vector<std::vector<int64_t>> partition_by_label(const PartitionSpec& spec, const std::vector<int64_t>& labels,
                                                     int num_nodes, uint64_t seed);

// A draw from the symmetric Dirichlet distribution Dir(alpha, ..., alpha) of
// dimension `k`, from `seed`. Computed in log space, so that tiny alphas
// (0.01) give proportions that sum to 1 instead of underflowing to 0/0.
// Exposed for tests.
std::vector<double> dirichlet_draw(double alpha, int k, uint64_t seed);

}  // namespace exogym::runtime::data
