#pragma once
// What each node trains on, in numbers: data.csv and the label skew of
// summary.json and the variants' table, so that a run shows how non-IID its
// data was.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "exogym/runtime/data/sampler.h"

namespace exogym::runtime::data {

struct NodeData {
  int64_t examples = 0;
  std::map<int64_t, int64_t> label_counts;  // label -> examples; empty without labels
};

// Node r's row from sampler.node_examples(r) and, when the dataset has them,
// the examples' labels.
NodeData node_data(const Sampler& sampler, int rank, const std::vector<int64_t>* labels);

// The mean over nodes of the fraction of a node's examples that carry its
// most frequent label: 1 when every node sees a single label, about
// 1/labels for IID data over balanced labels. nullopt without labels.
std::optional<double> label_skew(const std::vector<NodeData>& nodes);

}  // namespace exogym::runtime::data
