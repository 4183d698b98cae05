#include "exogym/runtime/comm/collective_call.h"

#include <sstream>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

const char* collective_name(int32_t kind) {
  static const char* names[] = {"all_reduce", "broadcast", "all_gather", "barrier"};
  return kind >= 0 && kind < 4 ? names[kind] : "an unknown collective";
}

const char* collective_name(const CollectiveCall& call) {
  return call.shared_result ? "all_reduce_shared" : collective_name(call.kind);
}

void check_same_collective(const CollectiveCall& call, int rank, const CollectiveCall& reference, int reference_rank) {
  // A mismatch is a strategy bug: say exactly where.
  auto where = [&] {
    return std::string("collective mismatch: node ") + std::to_string(rank) + " called " + collective_name(call) +
           " while node " + std::to_string(reference_rank) + " called " + collective_name(reference);
  };
  if (call.kind != reference.kind || call.shared_result != reference.shared_result) throw sdk::Error(where());
  if (call.tensors.size() != reference.tensors.size()) {
    throw sdk::Error(where() + " with " + std::to_string(call.tensors.size()) + " tensors instead of " +
                     std::to_string(reference.tensors.size()));
  }
  if (call.kind == CollectiveKind::AllGather || call.kind == CollectiveKind::Barrier) return;
  if (call.op != reference.op || call.root != reference.root)
    throw sdk::Error(where() + " with a different op or root");
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    const auto& a = call.tensors[i];
    const auto& b = reference.tensors[i];
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
      std::ostringstream s;
      s << where() << ": tensor " << i << " is " << a.sizes() << " " << a.scalar_type() << " on node " << rank
        << " but " << b.sizes() << " " << b.scalar_type() << " on node " << reference_rank;
      throw sdk::Error(s.str());
    }
  }
}

}  // namespace exogym::runtime::comm
