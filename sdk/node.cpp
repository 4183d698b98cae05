#include "exogym/sdk/node.h"

#include "exogym/sdk/metric_sink.h"

namespace exogym::sdk {

std::vector<int> NodeContext::live_ranks() const {
  if (live) return *live;
  std::vector<int> all(static_cast<size_t>(num_nodes));
  for (int r = 0; r < num_nodes; ++r) all[static_cast<size_t>(r)] = r;
  return all;
}

void NodeContext::record(const std::string& name, double value) const {
  if (metrics) metrics->record(rank, step, name, value);
}

}  // namespace exogym::sdk
