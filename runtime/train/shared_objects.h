#pragma once
// The runtime's side of sdk/shared.h: one registry per process and run, in
// which the n-th request under a key is the same object on every node, and
// each node's view of it, which counts that node's requests.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "exogym/sdk/shared.h"

namespace exogym::runtime::train {

class SharedRegistry {
 public:
  // The object made for request number `occurrence` under `key`, making it
  // with `make` if this is the first node to ask.
  std::shared_ptr<void> share(const std::string& key, int occurrence,
                              const std::function<std::shared_ptr<void>()>& make);
  // The objects held (tests, and the memory accounting of a run).
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<void>> objects_;
};

// One node's view: its requests in order.
class NodeSharedObjects final : public sdk::SharedObjects {
 public:
  explicit NodeSharedObjects(SharedRegistry& registry) : registry_(registry) {}
  std::shared_ptr<void> share(const std::string& key, const std::function<std::shared_ptr<void>()>& make) override;

 private:
  SharedRegistry& registry_;
  std::map<std::string, int> requests_;  // this node's, by key
};

}  // namespace exogym::runtime::train
