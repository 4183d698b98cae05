#pragma once
// Where NodeContext::record writes (node.h): the runtime's run writer, a test's double.
#include <cstdint>
#include <string>

namespace exogym::sdk {

class MetricSink {
 public:
  virtual ~MetricSink() = default;
  // A row of metrics.csv (step,node,name,value); called from every node's thread at once.
  virtual void record(int node, int64_t step, const std::string& name, double value) = 0;
};

}  // namespace exogym::sdk
