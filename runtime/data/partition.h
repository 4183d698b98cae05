#pragma once
// The manifest's data.train.partition: how the training examples are shared
// out among the nodes. "iid" and "contiguous" need nothing of the data; the
// label partitions ("dirichlet", "shards", "labels") need each example's
// integer label and give every node a fixed set of examples (see
// label_partition.h).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace exogym::runtime::data {

struct PartitionSpec {
  enum class Kind { Iid, Contiguous, Dirichlet, Shards, Labels };
  Kind kind = Kind::Iid;
  double alpha = 0;             // Dirichlet: the concentration
  int64_t shards_per_node = 0;  // Shards: s
  // Labels: each node's labels, every node of the run present.
  std::map<int, std::vector<int64_t>> node_labels;
  std::string json_path = "data.train.partition";  // for error messages

  // Whether the partition reads the examples' labels.
  bool by_label() const { return kind != Kind::Iid && kind != Kind::Contiguous; }
  // "iid", "contiguous", "dirichlet", "shards" or "labels".
  const char* name() const {
    switch (kind) {
      case Kind::Iid:
        return "iid";
      case Kind::Contiguous:
        return "contiguous";
      case Kind::Dirichlet:
        return "dirichlet";
      case Kind::Shards:
        return "shards";
      case Kind::Labels:
        return "labels";
    }
    return "?";
  }
};

}  // namespace exogym::runtime::data
