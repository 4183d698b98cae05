#include "exogym/runtime/train/shared_objects.h"

#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

std::shared_ptr<void> SharedRegistry::share(const std::string& key, int occurrence,
                                            const std::function<std::shared_ptr<void>()>& make) {
  // One lock for the lookup and the making: the nodes' requests come from
  // init(), once per run, so they never contend for long, and a second node
  // must not make an object the first is still making.
  std::lock_guard<std::mutex> lock(mutex_);
  auto& object = objects_[{key, occurrence}];
  if (!object) {
    object = make();
    if (!object) throw sdk::Error("the shared object \"" + key + "\" was made null");
  }
  return object;
}

size_t SharedRegistry::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return objects_.size();
}

std::shared_ptr<void> NodeSharedObjects::share(const std::string& key,
                                               const std::function<std::shared_ptr<void>()>& make) {
  return registry_.share(key, requests_[key]++, make);
}

}  // namespace exogym::runtime::train
