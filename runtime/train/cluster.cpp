#include "exogym/runtime/train/cluster.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/comm/collective_backend.h"
#include "exogym/runtime/comm/hierarchical_group.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

Cluster::Cluster(int nodes, int parallelism, sim::ClockExchange* clocks)
    : nodes_(nodes),
      block_{0, nodes},
      slots_(std::max(1, parallelism), abort_),
      group_(std::make_unique<comm::InProcessGroup>(nodes, abort_, std::min(std::max(1, parallelism), nodes) - 1,
                                                    clocks)) {
  start_meetings();
}

Cluster::Cluster(int nodes, int parallelism, dist::ProcessMesh& mesh, dist::NodeBlock block, sim::ClockExchange* clocks,
                 bool exact_reduce)
    : nodes_(nodes),
      block_(block),
      slots_(std::max(1, parallelism), abort_),
      hierarchical_(std::make_unique<comm::HierarchicalGroup>(mesh, nodes, block, abort_, clocks, exact_reduce)),
      mesh_(&mesh) {
  start_meetings();
  // A failure on either side stops both. Each side ignores all but the first
  // call, so the echo from the other side is harmless.
  mesh.set_nodes(nodes);
  mesh.set_failure_listener([this](const std::string& reason) { abort_.trigger(reason); });
  abort_.on_abort([this] { mesh_->fail(abort_.reason()); });
  if (mesh.failed()) abort_.trigger(mesh.failure());
}

Cluster::~Cluster() {
  if (mesh_) mesh_->set_failure_listener(nullptr);
}

comm::InProcessGroup& Cluster::group() {
  EXOGYM_CHECK_INTERNAL(group_, "Cluster::group(): this cluster spans several processes");
  return *group_;
}

comm::CollectiveBackend& Cluster::backend() {
  if (hierarchical_) return *hierarchical_;
  return *group_;
}

std::unique_ptr<sdk::Communicator> Cluster::communicator(int rank, threads::NodeSlot* slot) {
  if (hierarchical_) return hierarchical_->communicator(rank, slot);
  return group_->communicator(rank, slot);
}

void Cluster::start_meetings() {
  meeting_work_.resize(static_cast<size_t>(block_.count));
  everyone_ = std::make_unique<comm::MeetingPoint>(block_.count, block_.first, abort_,
                                                   [this](const comm::MeetingPoint::Calls&) {
                                                     if (meeting_work_[0]) meeting_work_[0]();
                                                     if (mesh_) mesh_->barrier();
                                                     // Every node of the run is through (not
                                                     // before: cross_process_waits.h).
                                                     std::vector<int> ranks;
                                                     for (int j = 0; j < block_.count; ++j)
                                                       ranks.push_back(block_.first + j);
                                                     backend().leave_all_elsewhere(ranks);
                                                   });
}

void Cluster::meet_all(int rank, threads::NodeSlot* slot, std::function<void()> work) {
  // Only this node's thread writes its entry, before it arrives; the work
  // reads the first one's once everybody has.
  const int index = rank - block_.first;
  meeting_work_[static_cast<size_t>(index)] = std::move(work);
  comm::CollectiveCall call;
  call.kind = comm::CallKind::Barrier;
  // A subgroup that waits for this node never completes.
  backend().enter_elsewhere(rank, "waits in a meeting of every node between steps");
  everyone_->meet(index, std::move(call), slot);
  backend().leave_elsewhere(rank);
}

void Cluster::set_members(std::vector<int> live) {
  for (const auto& listener : members_listeners_) listener(live);
  if (hierarchical_)
    hierarchical_->set_members(std::move(live));
  else
    group_->set_members(std::move(live));
}

void Cluster::add_members_listener(std::function<void(const std::vector<int>& live)> listener) {
  members_listeners_.push_back(std::move(listener));
}

void Cluster::enter_elsewhere(int rank, const std::string& what) { backend().enter_elsewhere(rank, what); }

void Cluster::leave_all_elsewhere(const std::vector<int>& ranks) { backend().leave_all_elsewhere(ranks); }

void Cluster::run(const std::function<void(int, threads::NodeSlot&)>& body) {
  std::mutex error_mutex;
  std::exception_ptr first_error;

  auto node_main = [&](int rank) {
    try {
      threads::NodeSlot slot(&slots_);
      body(rank, slot);
      // A subgroup that waits for it now never completes.
      backend().enter_elsewhere(rank, "has finished its run");
    } catch (const sdk::AbortedError&) {
      // A consequence of another node's failure, not a cause.
    } catch (...) {
      const std::string reason = util::current_exception_text();
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      abort_.trigger(reason);
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(block_.count);
  try {
    for (int rank = block_.first; rank < block_.first + block_.count; ++rank) threads.emplace_back(node_main, rank);
  } catch (const std::system_error& e) {
    abort_.trigger(std::string("could not start node threads: ") + e.what());
    for (auto& t : threads) t.join();
    throw sdk::Error("could not start " + std::to_string(block_.count) + " node threads: " + e.what());
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
  if (abort_.aborted()) throw sdk::Error("run aborted: " + abort_.reason());
}

}  // namespace exogym::runtime::train
