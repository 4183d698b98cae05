// A per-node dataset plugin (EXOGYM_NODE_DATASET_PLUGIN): node r's training
// set has `size` + r examples, example i of input [i] and target
// (i + r) % classes, so tests see which node's instance a batch came from.
// With "log", every build appends "split rank first_node local_nodes
// num_nodes seed pid" to that file: tests check that each node's instance
// was built once, with its rank, by the process hosting the node.
#include <ATen/ATen.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "exogym/sdk/dataset.h"
#include "exogym/sdk/plugin.h"

namespace {

exogym::sdk::OptionSpecs node_counting_options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"size", OptionType::PositiveInteger, 200, "examples of node 0 (node r has size + r)"},
          OptionSpec{"classes", OptionType::PositiveInteger, 4, "number of classes"},
          OptionSpec{"log", OptionType::String, "", "file to append each build's request to"}};
}

class NodeCountingDataset final : public exogym::sdk::Dataset {
 public:
  NodeCountingDataset(const nlohmann::json& o, const exogym::sdk::DatasetRequest& request)
      : shift_(request.rank < 0 ? 0 : request.rank),
        size_(o.at("size").get<int64_t>() + shift_),
        classes_(o.at("classes").get<int64_t>()) {
    const std::string log = o.at("log").get<std::string>();
    if (!log.empty()) {
      std::ofstream(log, std::ios::app) << request.split << ' ' << request.rank << ' ' << request.first_node << ' '
                                        << request.local_nodes << ' ' << request.num_nodes << ' ' << request.seed << ' '
                                        << ::getpid() << '\n';
    }
  }
  int64_t size() const override { return size_; }
  exogym::sdk::Batch get(const std::vector<int64_t>& indices) const override {
    auto idx = at::tensor(indices, at::kLong);
    return {{"input", idx.to(at::kFloat).unsqueeze(1)}, {"target", (idx + shift_).remainder(classes_)}};
  }

 private:
  int64_t shift_, size_, classes_;
};

}  // namespace

EXOGYM_NODE_DATASET_PLUGIN("node-counting", "0.0.1", NodeCountingDataset, node_counting_options)
