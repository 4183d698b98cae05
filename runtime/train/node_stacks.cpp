#include "exogym/runtime/train/node_stacks.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "exogym/runtime/output/progress.h"
#include "exogym/runtime/train/stack_group.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

struct DeviceNodes {
  c10::Device device;
  std::vector<int> ranks;
};

// The nodes of `block` by device, in the order devices first appear
// (host::device_for_node's round-robin).
std::vector<DeviceNodes> nodes_by_device(const std::vector<c10::Device>& devices, const dist::NodeBlock& block) {
  std::vector<DeviceNodes> groups;
  for (int rank = block.first; rank < block.first + block.count; ++rank) {
    const c10::Device device =
        devices.empty() ? c10::Device(c10::kCPU) : devices[static_cast<size_t>(rank) % devices.size()];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const DeviceNodes& g) { return g.device == device; });
    if (it == groups.end()) it = groups.insert(groups.end(), DeviceNodes{device, {}});
    it->ranks.push_back(rank);
  }
  return groups;
}

// Whether "auto" stacks a device's nodes: two or more, on a GPU. On the CPU
// the nodes computing on their own, one per compute slot, are as fast or
// faster: a stack saves no arithmetic there (each node's products are its
// own), and a node that takes its local steps one after the other keeps its
// tensors in cache, where a stack's nodes step in lock-step (stacked 0.52-
// 0.76x per node for MLP nodes, 0.94-1.08x for nanoGPT's: docs/performance.md
// #stacked-execution).
bool auto_stacks(const DeviceNodes& g) { return g.ranks.size() >= 2 && !g.device.is_cpu(); }

// Why `m`'s nodes in `block` cannot compute stacked, or "".
std::string why_not(const manifest::Manifest& m, const Replicas& replicas, const dist::NodeBlock& block,
                    const std::vector<DeviceNodes>& by_device, const std::string& model_name) {
  const sdk::Model& first = *replicas.models[static_cast<size_t>(block.first)];
  if (!first.supports_stacking())
    return "the " + model_name + " has no stacked forward (docs/plugins.md#stacked-execution)";
  if (m.execution == manifest::Execution::Auto && std::none_of(by_device.begin(), by_device.end(), auto_stacks)) {
    if (std::all_of(by_device.begin(), by_device.end(), [](const DeviceNodes& g) { return g.ranks.size() < 2; }))
      return block.count == 1 ? "one node in this process" : "one node per device";
    return "on the CPU, nodes computing side by side are faster than one stacked computation "
           "(docs/performance.md#stacked-execution; \"execution\": \"stacked\" stacks them anyway)";
  }
  for (const auto& g : by_device) {
    if (auto difference = replicas_differ(replicas, g.ranks)) return *difference;
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
  for (const auto& g : by_device) {
    // Under "auto" the nodes of the CPU, or alone on a device, compute on their own.
    if (m.execution == manifest::Execution::Auto && !auto_stacks(g)) continue;
    for (int rank : g.ranks) group_of_[static_cast<size_t>(rank - block.first)] = static_cast<int>(groups_.size());
    choice_.stacks.push_back(static_cast<int>(g.ranks.size()));
    groups_.push_back(std::make_unique<StackGroup>(replicas, g.ranks));
  }
}

NodeStacks::~NodeStacks() = default;

ExecutionChoice NodeStacks::choice() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ExecutionChoice out = choice_;
  if (!out.stacked) return out;
  for (const auto& group : groups_) {
    out.part_sizes.push_back(group->part_size());
    out.steps_together += group->steps_together();
    out.steps_after_backward += group->steps_after_backward();
    out.steps_apart += group->steps_apart();
    if (out.apart_because.empty()) out.apart_because = group->apart_because();
    if (out.parts_because.empty()) out.parts_because = group->parts_because();
  }
  return out;
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
    choice_ = ExecutionChoice();
    choice_.reason = reason;
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

void NodeStacks::connect(Cluster& cluster, manifest::Precision precision, int intra_op_threads, int compute_slots) {
  for (auto& group : groups_)
    group->connect(cluster, precision, std::max(1, intra_op_threads), std::max(1, compute_slots));
}

void NodeStacks::disconnect() {
  for (auto& group : groups_) group->disconnect();
}

StackGroup& NodeStacks::group(int rank) const {
  const int index = group_of_[static_cast<size_t>(rank - block_.first)];
  EXOGYM_CHECK_INTERNAL(index >= 0, "node " + std::to_string(rank) + " computes in no stack");
  return *groups_[static_cast<size_t>(index)];
}

double NodeStacks::forward_backward(int rank, const std::vector<sdk::Batch>& micro_batches, threads::NodeSlot* slot,
                                    sim::NodeMeter& meter) {
  return group(rank).forward_backward(rank, micro_batches, slot, meter);
}

bool NodeStacks::take_step(int rank, int64_t t, sdk::LocalStep& step, threads::NodeSlot* slot, sim::NodeMeter& meter) {
  return group(rank).take_step(rank, t, step, slot, meter);
}

void NodeStacks::take_after_backward(int rank, int64_t t, sdk::LocalStep& step) {
  group(rank).take_after_backward(rank, t, step);
}

void NodeStacks::end_step(int rank, int64_t t, threads::NodeSlot* slot, sim::NodeMeter& meter) {
  group(rank).end_step(rank, t, slot, meter);
}

}  // namespace exogym::runtime::train
