// The leader's part of each collective between processes (see
// hierarchical_group.h): this process's payload out, the others' in, and the
// results every local node then takes.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "exogym/runtime/comm/hierarchical_group.h"
#include "exogym/runtime/comm/nccl_exchange.h"
#include "exogym/runtime/comm/reduction.h"
#include "exogym/runtime/comm/tensor_message.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

using sdk::ReduceOp;

bool HierarchicalGroup::per_node_blocks(const CollectiveCall& first) const {
  // Only floating-point sums depend on the order of addition.
  if (!exact_ || (first.op != ReduceOp::Sum && first.op != ReduceOp::Avg)) return false;
  for (const auto& t : first.tensors) {
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) return true;
  }
  return false;
}

at::Tensor HierarchicalGroup::local_part(const Calls& calls, const TensorLayout& layout, bool per_node) const {
  // Its live nodes' tensors (exact sums) or their partial reduction in rank
  // order.
  const CollectiveCall& first = calls[local_.front()];
  const int64_t count = static_cast<int64_t>(local_.size());
  at::Tensor send = at::empty({(per_node ? count : 1) * layout.block_bytes()}, at::kByte);
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    if (per_node) {
      for (int64_t b = 0; b < count; ++b) layout.view(send, i, b).copy_(calls[local_[b]].tensors[i]);
      continue;
    }
    at::Tensor target = layout.view(send, i);
    at::Tensor acc = first.tensors[i].is_cpu() ? target.copy_(first.tensors[i]) : first.tensors[i].clone();
    for (int64_t b = 1; b < count; ++b) combine(acc, calls[local_[b]].tensors[i], first.op);
    if (!first.tensors[i].is_cpu()) target.copy_(acc);
  }
  return send;
}

void HierarchicalGroup::check_all_reduce_blocks(const std::vector<Header>& headers, int64_t block_bytes,
                                                bool per_node) const {
  for (int q : mesh_.members()) {
    const int expected = per_node ? live_by_process_[q] : 1;
    if (headers[q].blocks != expected || headers[q].payload != static_cast<uint64_t>(expected * block_bytes)) {
      throw sdk::Error("collective mismatch between processes: " + mesh_.describe(q) + " sent " +
                       std::to_string(headers[q].payload) + " bytes for an all_reduce where " +
                       std::to_string(expected * block_bytes) + " were expected (are all processes run with the " +
                       "same --partial-reduce setting?)");
    }
  }
}

void HierarchicalGroup::lead_all_reduce(const Calls& calls, Header& mine) {
  const CollectiveCall& first = calls[local_.front()];
  const bool per_node = per_node_blocks(first);
#if EXOGYM_HAVE_NCCL
  // NCCL's communicator spans every process: not while one sits out.
  bool one_gpu = !per_node && !first.tensors.empty() && static_cast<int>(mesh_.members().size()) == mesh_.size();
  for (const auto& t : first.tensors) one_gpu = one_gpu && t.is_cuda() && t.device() == first.tensors[0].device();
  if (one_gpu) {
    lead_all_reduce_nccl(calls, mine);
    return;
  }
#endif
  const TensorLayout layout(first.tensors);
  const at::Tensor send = local_part(calls, layout, per_node);
  mine.payload = static_cast<uint64_t>(send.numel());
  mine.blocks = per_node ? static_cast<int32_t>(local_.size()) : 1;
  const auto headers = exchange_headers(mine);
  check_all_reduce_blocks(headers, layout.block_bytes(), per_node);
  gather_payloads(send, headers);

  // Every process folds the same blocks in the same order (process order,
  // and rank order within a process): the same bits everywhere.
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    at::Tensor acc;
    for (int q : mesh_.members()) {
      for (int b = 0; b < headers[q].blocks; ++b) {
        at::Tensor part = layout.view(buffers_[q], i, b);
        if (!acc.defined()) {
          acc = part.clone();
        } else {
          combine(acc, part, first.op);
        }
      }
    }
    if (first.op == ReduceOp::Avg) average_sum(acc, live_count());
    result_.push_back(acc);
  }
}

#if EXOGYM_HAVE_NCCL
void HierarchicalGroup::lead_all_reduce_nccl(const Calls& calls, Header& mine) {
  const CollectiveCall& first = calls[local_.front()];
  const ReduceOp fold = first.op == ReduceOp::Avg ? ReduceOp::Sum : first.op;  // divided at the end
  mine.blocks = 1;
  exchange_headers(mine);  // checks that every process calls the same, and shares the clocks
  const c10::Device device = first.tensors[0].device();
  if (!nccl_ || nccl_->device() != device) nccl_ = std::make_unique<NcclExchange>(mesh_, device);
  nccl_->synchronize();
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    at::Tensor acc = first.tensors[i].clone();
    for (size_t b = 1; b < local_.size(); ++b) combine(acc, calls[local_[b]].tensors[i], fold);
    nccl_->all_reduce(acc, fold);
    if (first.op == ReduceOp::Avg) average_sum(acc, live_count());
    result_.push_back(acc);
  }
  nccl_->synchronize();
}
#endif

void HierarchicalGroup::lead_broadcast(const Calls& calls, Header& mine) {
  const CollectiveCall& first = calls[local_.front()];
  if (!std::binary_search(live_.begin(), live_.end(), first.root)) {
    throw sdk::Error("broadcast: root " + std::to_string(first.root) + " is down");
  }
  const int root_process = dist::process_of_node(first.root, nodes_, mesh_.size());
  const TensorLayout layout(first.tensors);
  const int64_t total = layout.block_bytes();
  at::Tensor buffer = at::empty({total}, at::kByte);
  if (root_process == mesh_.rank()) {
    const CollectiveCall& root = calls[first.root - block_.first];
    for (size_t i = 0; i < root.tensors.size(); ++i) layout.view(buffer, i).copy_(root.tensors[i]);
    mine.payload = static_cast<uint64_t>(total);
  }
  const auto headers = exchange_headers(mine);
  if (headers[root_process].payload != static_cast<uint64_t>(total)) {
    throw sdk::Error("collective mismatch between processes: " + mesh_.describe(root_process) +
                     " broadcasts a different amount of data than expected");
  }
  mesh_.broadcast(buffer.data_ptr(), static_cast<size_t>(total), root_process, dist::ProcessMesh::Scope::Members);
  for (size_t i = 0; i < first.tensors.size(); ++i) result_.push_back(layout.view(buffer, i));
  buffers_.push_back(buffer);
}

void HierarchicalGroup::lead_all_gather(const Calls& calls, Header& mine) {
  const size_t count = calls[local_.front()].tensors.size();
  std::vector<at::Tensor> local;  // by live node, then tensor
  for (int j : local_) local.insert(local.end(), calls[j].tensors.begin(), calls[j].tensors.end());
  const at::Tensor send = pack_tensors(local);
  mine.payload = static_cast<uint64_t>(send.numel());
  const auto headers = exchange_headers(mine);
  gather_payloads(send, headers);

  // Processes host contiguous blocks of ranks: their live nodes one after
  // the other are the live nodes in rank order.
  gathered_.clear();
  for (int q : mesh_.members()) {
    const auto tensors = unpack_tensors(buffers_[q]);
    const size_t nodes = static_cast<size_t>(live_by_process_[q]);
    if (!tensors || tensors->size() != nodes * count) {
      throw sdk::Error("all_gather: the data from " + mesh_.describe(q) + " is malformed");
    }
    for (size_t j = 0; j < nodes; ++j) {
      gathered_.emplace_back(tensors->begin() + static_cast<std::ptrdiff_t>(j * count),
                             tensors->begin() + static_cast<std::ptrdiff_t>((j + 1) * count));
    }
  }
}

}  // namespace exogym::runtime::comm
