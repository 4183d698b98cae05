// ProcessMesh for builds without Gloo (EXOGYM_WITH_GLOO=OFF, or libgloo-dev
// missing): a run that asks for several processes gets a clear error.
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/dist/store_connection.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

ProcessMesh::ProcessMesh(const WorldSpec& world, const std::string&) : world_(world) {
  throw sdk::Error(
      "this exogym-run was built without Gloo (libgloo-dev), so it cannot run several processes; rebuild "
      "with Gloo installed (see docs/multiprocess.md)");
}
ProcessMesh::~ProcessMesh() = default;
void ProcessMesh::set_nodes(int) {}
std::string ProcessMesh::describe(int process) const { return "process " + std::to_string(process); }
void ProcessMesh::all_gather(const void*, size_t, const std::vector<void*>&, const std::vector<size_t>&, Scope) {}
void ProcessMesh::broadcast(void*, size_t, int, Scope) {}
void ProcessMesh::exchange_tagged(const std::vector<PeerMessage>&, uint64_t) {}
void ProcessMesh::set_members(std::vector<int>) {}
std::vector<std::string> ProcessMesh::all_gather_text(const std::string& mine) { return {mine}; }
void ProcessMesh::barrier() {}
uint64_t ProcessMesh::highest(uint64_t mine) { return mine; }
void ProcessMesh::propose_stop(int, int64_t, bool) {}
bool ProcessMesh::stop_asked(int) { return false; }
std::optional<int64_t> ProcessMesh::agreed_stop(int) { return std::nullopt; }
void ProcessMesh::fail(const std::string&) {}
std::string ProcessMesh::failure() const { return failure_; }
void ProcessMesh::set_failure_listener(std::function<void(const std::string&)>) {}
void ProcessMesh::finish() {}

}  // namespace exogym::runtime::dist
