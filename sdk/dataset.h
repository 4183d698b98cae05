#pragma once
// A dataset plugin: a read-only, indexable collection of examples. It is built
// once per process and shared by every node thread; the runtime shards it
// across nodes (see the manifest's "partition").
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/sdk/model.h"

namespace exogym::sdk {

struct DatasetRequest {
  std::filesystem::path path;  // resolved against the manifest's folder; may be empty
  std::string split;           // "train", "test", "val", ...
  uint64_t seed = 0;           // the run's seed
  // The dataset-plugin factory's (rank, num_nodes): the process that builds
  // the dataset hosts nodes [first_node, first_node + local_nodes) of
  // num_nodes. A plugin may load only what those nodes need.
  int first_node = 0;
  int local_nodes = 1;
  int num_nodes = 1;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The examples at `indices`, stacked into a batch. Called concurrently from
  // many node threads: must not mutate shared state.
  virtual Batch get(const std::vector<int64_t>& indices) const = 0;
  // Token datasets: the tokens one example trains on (its sequence length),
  // so that the run's summary can report tokens trained and tokens per
  // second. 0: not a token dataset.
  virtual int64_t tokens_per_example() const { return 0; }
};

}  // namespace exogym::sdk
