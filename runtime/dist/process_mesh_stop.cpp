// ProcessMesh: the processes' votes on where an interrupted run stops, kept
// in the rendezvous store (store_keys.h).
#include <algorithm>
#include <string>
#include <vector>

#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/dist/store_connection.h"
#include "exogym/runtime/dist/store_keys.h"

namespace exogym::runtime::dist {

void ProcessMesh::propose_stop(int round, int64_t step, bool asked) {
  store_->set(stop_key(round, rank()), std::to_string(step));
  if (asked) store_->add(stop_asked_key(round), 1);
}

bool ProcessMesh::stop_asked(int round) { return store_->add(stop_asked_key(round), 0) > 0; }

std::optional<int64_t> ProcessMesh::agreed_stop(int round) {
  std::vector<std::string> keys;
  for (int q = 0; q < size(); ++q) keys.push_back(stop_key(round, q));
  if (!store_->check(keys)) return std::nullopt;
  int64_t stop = 0;
  for (const auto& key : keys) stop = std::max(stop, static_cast<int64_t>(std::stoll(store_->get(key))));
  return stop;
}

}  // namespace exogym::runtime::dist
