#pragma once
// State that is the same on every node, stored once per process instead of
// once per node: DiLoCo's master copy and outer optimizer, a decoded update
// every node applies alike. K nodes of a process then hold one copy, which
// is what lets thousands of nodes fit in one machine's memory.
//
// A strategy (or a communication module) asks for such an object from
// init(), on its node's thread:
//
//   auto master = sdk::shared_in_process<Master>(ctx, "diloco.master",
//                                               [&] { return std::make_shared<Master>(...); });
//
// The n-th request under a key returns, on every node of the process, the
// one object the first node to ask made (the others' `make` is not called).
// Nodes make their requests in the same order (as their collectives), so a
// strategy that holds two such objects under one key (two modules of the
// same kind) gets two objects. The object lives as long as a node holds it;
// each run (and each variant) has its own.
//
// The object is shared between threads: the nodes of a process run at the
// same time, so what they change in it needs a lock, and each must keep
// what is its own (its parameters, its optimizer) apart. A collective is a
// synchronisation point: what every node did before it happens before what
// any does after it. The usual pattern, for a value all nodes would compute
// alike from a collective's result: under the object's mutex, the first node
// to get there computes it and stamps it with the step; the others see the
// stamp and only read it.
//
// Without a runtime (a NodeContext made by hand, as tests and the bench's
// bare loop do), every node gets its own object: correct, just not shared.
#include <functional>
#include <memory>
#include <string>

#include "exogym/sdk/node.h"

namespace exogym::sdk {

// The runtime's side: one per node, over one registry per process and run.
class SharedObjects {
 public:
  virtual ~SharedObjects() = default;
  // This node's next object under `key`: the one the first node of the
  // process to make the same request made with its `make`.
  virtual std::shared_ptr<void> share(const std::string& key, const std::function<std::shared_ptr<void>()>& make) = 0;
};

// The object of type T under `key` for this node (see above). Every node of
// the process must ask with the same T for the same key.
template <class T, class Make>
std::shared_ptr<T> shared_in_process(NodeContext& ctx, const std::string& key, Make make) {
  if (ctx.shared == nullptr) return make();
  return std::static_pointer_cast<T>(ctx.shared->share(key, [&] { return std::shared_ptr<void>(make()); }));
}

}  // namespace exogym::sdk
