#include "exogym/runtime/data/node_data.h"

#include <algorithm>

namespace exogym::runtime::data {

NodeData node_data(const Sampler& sampler, int rank, const std::vector<int64_t>* labels) {
  const std::vector<int64_t> examples = sampler.node_examples(rank);
  NodeData row;
  row.examples = static_cast<int64_t>(examples.size());
  if (labels) {
    for (int64_t i : examples) ++row.label_counts[(*labels)[static_cast<size_t>(i)]];
  }
  return row;
}

std::optional<double> label_skew(const std::vector<NodeData>& nodes) {
  if (nodes.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& node : nodes) {
    if (node.label_counts.empty() || node.examples == 0) return std::nullopt;
    int64_t most = 0;
    for (const auto& [label, count] : node.label_counts) most = std::max(most, count);
    sum += static_cast<double>(most) / static_cast<double>(node.examples);
  }
  return sum / static_cast<double>(nodes.size());
}

}  // namespace exogym::runtime::data
