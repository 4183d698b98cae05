#include "exogym/runtime/train/memory_check.h"

#include <spdlog/spdlog.h>

#include <string>

#include "exogym/runtime/util/units.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"

namespace exogym::runtime::train {

namespace {

// A gradient and Adam's two moments beside each trainable parameter.
constexpr uint64_t kCopiesPerTrainable = 3;

std::string bytes_text(uint64_t bytes) { return util::format_bytes(static_cast<double>(bytes)); }

}  // namespace

ReplicaBytes replica_bytes(sdk::Model& model) {
  ReplicaBytes bytes;
  for (const auto& p : model.network().parameters()) {
    if (!p.device().is_cpu()) continue;
    const auto n = static_cast<uint64_t>(p.nbytes());
    bytes.tensors += n;
    if (p.requires_grad()) bytes.trainable += n;
  }
  for (const auto& b : model.network().buffers()) {
    if (b.device().is_cpu()) bytes.tensors += static_cast<uint64_t>(b.nbytes());
  }
  return bytes;
}

uint64_t nodes_memory_floor(const ReplicaBytes& one, int nodes) {
  return static_cast<uint64_t>(nodes) * (one.tensors + kCopiesPerTrainable * one.trainable);
}

void check_memory(const manifest::Manifest& m, const ReplicaBytes& one, int nodes, const MemoryBudget& budget) {
  if (!budget.available) return;
  const uint64_t need = nodes_memory_floor(one, nodes);
  if (need <= *budget.available) return;
  const uint64_t per_node = nodes_memory_floor(one, 1);
  const std::string available = bytes_text(*budget.available) + " is available";
  const bool one_fits = per_node <= *budget.available;
  const std::string field = one_fits ? "nodes" : m.model.path + ".options";
  const std::string what =
      one_fits ? std::to_string(nodes) + " nodes need at least " + bytes_text(need) + " (" + bytes_text(per_node) +
                     " each: the model, its gradients and optimizer state), but " + available +
                     "; use fewer nodes or a smaller model"
               : "one node of the model \"" + m.model.plugin + "\" needs at least " + bytes_text(per_node) +
                     " (the model, its gradients and optimizer state), but " + available + "; use a smaller model";
  if (!budget.force) throw sdk::ConfigError(field, what + ", or --force to try anyway");
  spdlog::warn("{}: {} (--force: trying anyway)", field, what);
}

}  // namespace exogym::runtime::train
