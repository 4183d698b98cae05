#include "exogym/runtime/train/node_stacks.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "exogym/runtime/output/progress.h"

#include "exogym/runtime/train/stack_group.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

// The nodes of `block` by device, in the order devices first appear
// (host::device_for_node's round-robin).
std::vector<std::vector<int>> nodes_by_device(const std::vector<c10::Device>& devices, const dist::NodeBlock& block) {
  std::vector<std::vector<int>> groups;
  std::vector<c10::Device> seen;
  for (int rank = block.first; rank < block.first + block.count; ++rank) {
    const c10::Device device =
        devices.empty() ? c10::Device(c10::kCPU) : devices[static_cast<size_t>(rank) % devices.size()];
    const auto it = std::find(seen.begin(), seen.end(), device);
    const size_t index = static_cast<size_t>(it - seen.begin());
    if (it == seen.end()) {
      seen.push_back(device);
      groups.emplace_back();
    }
    groups[index].push_back(rank);
  }
  return groups;
}

// Why `m`'s nodes in `block` cannot compute stacked, or "".
std::string why_not(const manifest::Manifest& m, const Replicas& replicas, const dist::NodeBlock& block,
                    const std::vector<std::vector<int>>& by_device, const std::string& model_name) {
  const sdk::Model& first = *replicas.models[static_cast<size_t>(block.first)];
  if (!first.supports_stacking())
    return "the " + model_name + " has no stacked forward (docs/plugins.md#stacked-execution)";
  if (m.execution == manifest::Execution::Auto &&
      std::all_of(by_device.begin(), by_device.end(), [](const auto& ranks) { return ranks.size() < 2; }))
    return block.count == 1 ? "one node in this process" : "one node per device";
  for (const auto& ranks : by_device) {
    if (auto difference = replicas_differ(replicas, ranks)) return *difference;
  }
  return "";
}

}  // namespace

NodeStacks::NodeStacks(const manifest::Manifest& m, Replicas& replicas, const std::vector<c10::Device>& devices,
                       const dist::NodeBlock& block, const std::string& model_name)
    : requested_(m.execution), block_(block), group_of_(static_cast<size_t>(block.count), -1) {
  if (m.execution == manifest::Execution::PerNode) {
    choice_.reason = "execution is \"per_node\"";
    return;
  }
  const auto by_device = nodes_by_device(devices, block);
  choice_.reason = why_not(m, replicas, block, by_device, model_name);
  if (!choice_.reason.empty()) {
    if (m.execution == manifest::Execution::Stacked)
      throw sdk::ConfigError("execution", "\"stacked\" cannot apply: " + choice_.reason);
    return;
  }
  choice_.stacked = true;
  for (const auto& ranks : by_device) {
    // Under "auto" a node alone on its device computes on its own.
    if (ranks.size() < 2 && m.execution == manifest::Execution::Auto) continue;
    for (int rank : ranks) group_of_[static_cast<size_t>(rank - block.first)] = static_cast<int>(groups_.size());
    choice_.stacks.push_back(static_cast<int>(ranks.size()));
    groups_.push_back(std::make_unique<StackGroup>(replicas, ranks));
  }
}

NodeStacks::~NodeStacks() = default;

ExecutionChoice NodeStacks::choice() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return choice_;
}

bool NodeStacks::stacked(int rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return choice_.stacked && group_of_[static_cast<size_t>(rank - block_.first)] >= 0;
}

bool NodeStacks::start_node(int rank, bool asynchronous) {
  if (asynchronous) {
    const std::string reason = "an asynchronous strategy (each node computes in its own slots)";
    if (requested_ == manifest::Execution::Stacked)
      throw sdk::ConfigError("execution", "\"stacked\" cannot apply: " + reason);
    std::lock_guard<std::mutex> lock(mutex_);
    choice_ = {false, reason, {}};
  }
  return stacked(rank);
}

void NodeStacks::report(output::Progress& progress, spdlog::logger& log) const {
  const ExecutionChoice now = choice();
  progress.set_execution(now.stacked ? "stacked" : "per node");
  if (now.stacked) {
    log.info("execution: stacked, {} node(s) in {} stack(s)", block_.count, now.stacks.size());
  } else {
    log.info("execution: per node ({})", now.reason);
  }
}

void NodeStacks::connect(Cluster& cluster, manifest::Precision precision, int intra_op_threads) {
  for (auto& group : groups_) group->connect(cluster, precision, std::max(1, intra_op_threads));
}

void NodeStacks::disconnect() {
  for (auto& group : groups_) group->disconnect();
}

double NodeStacks::forward_backward(int rank, const std::vector<sdk::Batch>& micro_batches, threads::NodeSlot* slot,
                                    sim::NodeMeter& meter) {
  const int index = group_of_[static_cast<size_t>(rank - block_.first)];
  EXOGYM_CHECK_INTERNAL(index >= 0, "node " + std::to_string(rank) + " computes in no stack");
  return groups_[static_cast<size_t>(index)]->forward_backward(rank, micro_batches, slot, meter);
}

}  // namespace exogym::runtime::train
