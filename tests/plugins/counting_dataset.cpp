// A dataset plugin whose example i has input [i] and target i % classes:
// lets tests check exactly which examples each node received. With "log", it
// appends the request it was built with to that file (one line per build),
// so tests see which process built it for which nodes. With "record", get()
// appends the indices it was asked for to that file (one line per call), so
// tests see exactly which examples were read.
#include <ATen/ATen.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <string>

#include "exogym/sdk/dataset.h"
#include "exogym/sdk/plugin.h"

namespace {

exogym::sdk::OptionSpecs counting_options() {
  using exogym::sdk::OptionSpec;
  using exogym::sdk::OptionType;
  return {OptionSpec{"size", OptionType::PositiveInteger, 1000, "number of examples"},
          OptionSpec{"classes", OptionType::PositiveInteger, 10, "number of classes"},
          OptionSpec{"log", OptionType::String, "", "file to append \"split first_node local_nodes num_nodes pid\" to"},
          OptionSpec{"record", OptionType::String, "", "file to append the indices of every get() to"}};
}

class CountingDataset final : public exogym::sdk::Dataset {
 public:
  CountingDataset(const nlohmann::json& o, const exogym::sdk::DatasetRequest& request)
      : size_(o.at("size").get<int64_t>()),
        classes_(o.at("classes").get<int64_t>()),
        split_(request.split),
        record_(o.at("record").get<std::string>()) {
    const std::string log = o.at("log").get<std::string>();
    if (!log.empty()) {
      std::ofstream(log, std::ios::app) << request.split << ' ' << request.first_node << ' ' << request.local_nodes
                                        << ' ' << request.num_nodes << ' ' << ::getpid() << '\n';
    }
  }
  int64_t size() const override { return size_; }
  exogym::sdk::Batch get(const std::vector<int64_t>& indices) const override {
    if (!record_.empty()) {
      static std::mutex mutex;
      std::lock_guard<std::mutex> lock(mutex);
      std::ofstream out(record_, std::ios::app);
      for (int64_t i : indices) out << i << ' ';
      out << '\n';
    }
    auto idx = at::tensor(indices, at::kLong);
    return {{"input", idx.to(at::kFloat).unsqueeze(1)}, {"target", idx.remainder(classes_)}};
  }

 private:
  int64_t size_, classes_;
  std::string split_;
  std::string record_;
};

}  // namespace

EXOGYM_DATASET_PLUGIN("counting", "0.0.1", CountingDataset, counting_options)
