#include "exogym/runtime/comm/hierarchical_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "exogym/runtime/comm/collective_args.h"
#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/cluster/compute_slots.h"
#include "exogym/runtime/comm/nccl_exchange.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

using sdk::ReduceOp;

namespace {

// Tensors are laid out in messages at this alignment, so that the views
// built over received bytes are aligned like freshly allocated tensors.
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t tensor_bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// A CPU tensor over `bytes` of `buffer`; it lives as long as the buffer.
at::Tensor view_of(const at::Tensor& buffer, int64_t offset, at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::from_blob(buffer.data_ptr<uint8_t>() + offset, sizes, at::TensorOptions().dtype(dtype));
}

void combine(at::Tensor& acc, const at::Tensor& x, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      acc.add_(x);
      break;
    case ReduceOp::Min:
      at::minimum_out(acc, acc, x);
      break;
    case ReduceOp::Max:
      at::maximum_out(acc, acc, x);
      break;
  }
}

uint64_t fnv(uint64_t hash, int64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= static_cast<uint64_t>(value >> (8 * i)) & 0xff;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// What must match between processes: every tensor's dtype and shape.
uint64_t signature(const std::vector<at::Tensor>& tensors) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& t : tensors) {
    hash = fnv(hash, static_cast<int64_t>(t.scalar_type()));
    hash = fnv(hash, t.is_cuda() ? 1 : 0);  // CUDA tensors may take another path (NCCL)
    hash = fnv(hash, t.dim());
    for (int64_t s : t.sizes()) hash = fnv(hash, s);
  }
  return hash;
}

const char* kind_name(int32_t kind) {
  static const char* names[] = {"all_reduce", "broadcast", "all_gather", "barrier"};
  return kind >= 0 && kind < 4 ? names[kind] : "an unknown collective";
}

}  // namespace

// What each process's leader sends before the data: enough to check that
// every process calls the same collective, to size the data, and to carry
// the latest arrival for the simulated clocks.
struct HierarchicalGroup::Header {
  uint64_t sequence = 0;
  int32_t kind = 0, op = 0, root = 0, count = 0;
  uint64_t signature = 0;
  uint64_t payload = 0;  // bytes this process sends
  double arrival = 0;    // the latest arrival of this process's nodes
  int32_t has_arrival = 0;
  int32_t blocks = 0;  // all_reduce: reduced blocks in the payload
};

class HierarchicalCommunicator final : public sdk::Communicator {
 public:
  HierarchicalCommunicator(HierarchicalGroup& group, int rank, cluster::NodeSlot* slot)
      : group_(group), rank_(rank), slot_(slot) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }

  void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op) override {
    run_in_place(HierarchicalGroup::Kind::AllReduce, tensors, op, 0);
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    check_root(root, size());
    run_in_place(HierarchicalGroup::Kind::Broadcast, tensors, ReduceOp::Sum, root);
  }
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override {
    HierarchicalGroup::Posted posted;
    posted.kind = HierarchicalGroup::Kind::AllGather;
    posted.tensors = contiguous_payload(tensors);
    std::vector<std::vector<at::Tensor>> gathered;
    group_.run(rank_, posted, slot_, &gathered);
    return gathered;
  }
  void barrier() override {
    HierarchicalGroup::Posted posted;
    posted.kind = HierarchicalGroup::Kind::Barrier;
    group_.run(rank_, posted, slot_, nullptr);
  }

 private:
  void run_in_place(HierarchicalGroup::Kind kind, std::vector<at::Tensor>& tensors, ReduceOp op, int root) {
    HierarchicalGroup::Posted posted;
    posted.kind = kind;
    posted.op = op;
    posted.root = root;
    posted.tensors = contiguous_payload(tensors);
    std::vector<at::Tensor> work = posted.tensors;
    group_.run(rank_, std::move(posted), slot_, nullptr);
    copy_back(tensors, work);
  }

  HierarchicalGroup& group_;
  int rank_;
  cluster::NodeSlot* slot_;
};

HierarchicalGroup::HierarchicalGroup(dist::ProcessMesh& mesh, int nodes, dist::NodeBlock block, cluster::AbortSignal& abort,
                                     sim::ClockExchange* clocks, bool exact)
    : mesh_(mesh), nodes_(nodes), block_(block), abort_(abort), clocks_(clocks), exact_(exact), posted_(block.count) {
  if (block.count < 1) throw std::invalid_argument("HierarchicalGroup: a process must host at least one node");
  abort_.on_abort([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  });
}

HierarchicalGroup::~HierarchicalGroup() = default;

std::unique_ptr<sdk::Communicator> HierarchicalGroup::communicator(int rank, cluster::NodeSlot* slot) {
  if (!block_.contains(rank)) {
    throw std::out_of_range("HierarchicalGroup: node " + std::to_string(rank) + " is not hosted by this process");
  }
  return std::make_unique<HierarchicalCommunicator>(*this, rank, slot);
}

void HierarchicalGroup::arrive_and_wait(cluster::NodeSlot* slot) {
  // Give the compute slot back while waiting: the nodes we wait for need it.
  const bool had_slot = slot && slot->held();
  if (had_slot) slot->release();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (abort_.aborted()) throw sdk::AbortedError("run aborted: " + abort_.reason());
    const uint64_t generation = generation_;
    if (++arrived_ == block_.count) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation || abort_.aborted(); });
      if (generation_ == generation) throw sdk::AbortedError("run aborted: " + abort_.reason());
    }
  }
  if (had_slot) slot->acquire();
}

void HierarchicalGroup::run(int rank, Posted posted, cluster::NodeSlot* slot, std::vector<std::vector<at::Tensor>>* gathered) {
  const int local = rank - block_.first;
  const Kind kind = posted.kind;
  const int root = posted.root;
  std::vector<at::Tensor> mine = posted.tensors;
  posted_[local] = std::move(posted);
  arrive_and_wait(slot);  // every local node has posted
  if (local == 0) {
    try {
      lead();
    } catch (const sdk::AbortedError&) {
      throw;
    } catch (const std::exception& e) {
      // The others wait for this thread: stop them before reporting.
      abort_.trigger(e.what());
      throw sdk::Error(e.what());
    }
  }
  arrive_and_wait(slot);  // the results are ready
  switch (kind) {
    case Kind::AllReduce:
      for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(result_[i]);
      break;
    case Kind::Broadcast:
      if (rank != root) {
        for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(result_[i]);
      }
      break;
    case Kind::AllGather:
      gathered->assign(nodes_, {});
      for (int r = 0; r < nodes_; ++r) {
        for (size_t i = 0; i < gathered_[r].size(); ++i) {
          const auto& t = gathered_[r][i];
          // Fresh tensors on this node's device, as InProcessGroup returns.
          const auto device = i < mine.size() ? mine[i].device() : t.device();
          (*gathered)[r].push_back(t.to(t.options().device(device), /*non_blocking=*/false, /*copy=*/true));
        }
      }
      break;
    case Kind::Barrier:
      break;
  }
  // The next collective's leader work starts only once every local node has
  // posted again, so nobody still reads these results then.
  posted_[local] = Posted();
}

void HierarchicalGroup::check_local() const {
  // SPMD contract inside the process, as InProcessGroup checks it.
  const Posted& first = posted_[0];
  for (int j = 1; j < block_.count; ++j) {
    const Posted& mine = posted_[j];
    const int rank = block_.first + j;
    auto where = [&] {
      return std::string("collective mismatch: node ") + std::to_string(rank) + " called " +
             kind_name(static_cast<int32_t>(mine.kind)) + " while node " + std::to_string(block_.first) + " called " +
             kind_name(static_cast<int32_t>(first.kind));
    };
    if (mine.kind != first.kind) throw sdk::Error(where());
    if (mine.tensors.size() != first.tensors.size()) throw sdk::Error(where() + " with a different number of tensors");
    if (mine.kind == Kind::AllGather || mine.kind == Kind::Barrier) continue;
    if (mine.op != first.op || mine.root != first.root) throw sdk::Error(where() + " with a different op or root");
    for (size_t i = 0; i < mine.tensors.size(); ++i) {
      const auto& a = mine.tensors[i];
      const auto& b = first.tensors[i];
      if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
        std::ostringstream s;
        s << where() << ": tensor " << i << " is " << a.sizes() << " " << a.scalar_type() << " on node " << rank
          << " but " << b.sizes() << " " << b.scalar_type() << " on node " << block_.first;
        throw sdk::Error(s.str());
      }
    }
  }
}

std::vector<HierarchicalGroup::Header> HierarchicalGroup::exchange_headers(const Header& mine) {
  const int P = mesh_.size(), me = mesh_.rank();
  std::vector<Header> headers(P);
  headers[me] = mine;
  std::vector<void*> out;
  for (auto& h : headers) out.push_back(&h);
  mesh_.all_gather(&headers[me], sizeof(Header), out, std::vector<size_t>(P, sizeof(Header)));
  for (int q = 0; q < P; ++q) {
    const Header& h = headers[q];
    auto mismatch = [&](const std::string& what) {
      return sdk::Error("collective mismatch between processes: " + mesh_.describe(q) + " called " + kind_name(h.kind) +
                        " while this process, " + mesh_.describe(me) + ", called " + kind_name(mine.kind) + what +
                        " (collective " + std::to_string(mine.sequence) + ")");
    };
    if (h.sequence != mine.sequence || h.kind != mine.kind) throw mismatch("");
    if (h.count != mine.count) throw mismatch(" with a different number of tensors");
    if (h.op != mine.op || h.root != mine.root) throw mismatch(" with a different op or root");
    if (h.signature != mine.signature) throw mismatch(" with tensors of other shapes or dtypes");
    if (h.has_arrival != mine.has_arrival) throw mismatch(" (one as strategy traffic, one as the runtime's)");
  }
  if (mine.has_arrival && clocks_) {
    double latest = mine.arrival;
    for (const auto& h : headers) latest = std::max(latest, h.arrival);
    clocks_->share_latest(clock_sequence_, latest);
  }
  return headers;
}

bool HierarchicalGroup::per_node_blocks() const {
  // Only floating-point sums depend on the order of addition.
  const Posted& first = posted_[0];
  if (!exact_ || (first.op != ReduceOp::Sum && first.op != ReduceOp::Avg)) return false;
  for (const auto& t : first.tensors) {
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) return true;
  }
  return false;
}

void HierarchicalGroup::lead() {
  check_local();
  const Posted& first = posted_[0];
  Header mine;
  mine.sequence = sequence_++;
  mine.kind = static_cast<int32_t>(first.kind);
  mine.op = first.kind == Kind::AllReduce ? static_cast<int32_t>(first.op) : 0;
  mine.root = first.kind == Kind::Broadcast ? first.root : 0;
  mine.count = static_cast<int32_t>(first.tensors.size());
  if (first.kind == Kind::AllReduce || first.kind == Kind::Broadcast) mine.signature = signature(first.tensors);
  if (clocks_) {
    if (auto local = clocks_->take_local(block_.first, block_.count)) {
      mine.has_arrival = 1;
      mine.arrival = local->latest;
      clock_sequence_ = local->sequence;
    }
  }
  result_.clear();
  gathered_.clear();
  buffers_.clear();
  switch (first.kind) {
    case Kind::AllReduce:
      lead_all_reduce(mine);
      break;
    case Kind::Broadcast:
      lead_broadcast(mine);
      break;
    case Kind::AllGather:
      lead_all_gather(mine);
      break;
    case Kind::Barrier:
      exchange_headers(mine);
      break;
  }
}

void HierarchicalGroup::gather_payloads(const at::Tensor& send, const std::vector<Header>& headers) {
  const int P = mesh_.size(), me = mesh_.rank();
  std::vector<void*> out(P, nullptr);
  std::vector<size_t> sizes(P, 0);
  buffers_.assign(P, at::Tensor());
  for (int q = 0; q < P; ++q) {
    if (q == me) {
      buffers_[q] = send;
      continue;
    }
    buffers_[q] = at::empty({static_cast<int64_t>(headers[q].payload)}, at::kByte);
    out[q] = buffers_[q].data_ptr();
    sizes[q] = headers[q].payload;
  }
  mesh_.all_gather(send.data_ptr(), headers[me].payload, out, sizes);
}

void HierarchicalGroup::lead_all_reduce(Header& mine) {
  const Posted& first = posted_[0];
  const int P = mesh_.size();
  const ReduceOp op = first.op;
  const ReduceOp fold = op == ReduceOp::Avg ? ReduceOp::Sum : op;  // divided by K at the end
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const auto& t : first.tensors) {
    offsets.push_back(total);
    total += aligned(tensor_bytes(t));
  }
  auto view = [&](const at::Tensor& buffer, int64_t block, size_t i) {
    const auto& t = first.tensors[i];
    return view_of(buffer, block * total + offsets[i], t.sizes(), t.scalar_type());
  };

  // This process's part: its nodes' tensors (exact sums) or their partial
  // reduction in rank order.
  const bool per_node = per_node_blocks();
#if EXOGYM_HAVE_NCCL
  bool one_gpu = !per_node && !first.tensors.empty();
  for (const auto& t : first.tensors) one_gpu = one_gpu && t.is_cuda() && t.device() == first.tensors[0].device();
  if (one_gpu) {
    lead_all_reduce_nccl(mine);
    return;
  }
#endif
  const int my_blocks = per_node ? block_.count : 1;
  at::Tensor send = at::empty({my_blocks * total}, at::kByte);
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    if (per_node) {
      for (int j = 0; j < block_.count; ++j) view(send, j, i).copy_(posted_[j].tensors[i]);
      continue;
    }
    at::Tensor target = view(send, 0, i);
    if (first.tensors[i].is_cpu()) {
      target.copy_(posted_[0].tensors[i]);
      for (int j = 1; j < block_.count; ++j) combine(target, posted_[j].tensors[i], fold);
    } else {
      at::Tensor acc = posted_[0].tensors[i].clone();
      for (int j = 1; j < block_.count; ++j) combine(acc, posted_[j].tensors[i], fold);
      target.copy_(acc);
    }
  }
  mine.payload = static_cast<uint64_t>(my_blocks * total);
  mine.blocks = my_blocks;
  const auto headers = exchange_headers(mine);

  for (int q = 0; q < P; ++q) {
    const int expected = per_node ? dist::node_block(nodes_, P, q).count : 1;
    if (headers[q].blocks != expected || headers[q].payload != static_cast<uint64_t>(expected * total)) {
      throw sdk::Error("collective mismatch between processes: " + mesh_.describe(q) + " sent " +
                       std::to_string(headers[q].payload) + " bytes for an all_reduce where " +
                       std::to_string(expected * total) + " were expected (are all processes run with the same " +
                       "--partial-reduce setting?)");
    }
  }
  gather_payloads(send, headers);

  // Every process folds the same blocks in the same order (process order,
  // and rank order within a process): the same bits everywhere.
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    at::Tensor acc;
    for (int q = 0; q < P; ++q) {
      for (int b = 0; b < headers[q].blocks; ++b) {
        at::Tensor part = view(buffers_[q], b, i);
        if (!acc.defined()) {
          acc = part.clone();
        } else {
          combine(acc, part, fold);
        }
      }
    }
    if (op == ReduceOp::Avg) {
      if (at::isIntegralType(acc.scalar_type(), /*includeBool=*/true)) {
        acc.div_(nodes_, "trunc");
      } else {
        acc.div_(nodes_);
      }
    }
    result_.push_back(acc);
  }
}

#if EXOGYM_HAVE_NCCL
void HierarchicalGroup::lead_all_reduce_nccl(Header& mine) {
  const Posted& first = posted_[0];
  const ReduceOp fold = first.op == ReduceOp::Avg ? ReduceOp::Sum : first.op;
  mine.blocks = 1;
  exchange_headers(mine);  // checks that every process calls the same, and shares the clocks
  const c10::Device device = first.tensors[0].device();
  if (!nccl_ || nccl_->device() != device) nccl_ = std::make_unique<NcclExchange>(mesh_, device);
  nccl_->synchronize();
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    at::Tensor acc = posted_[0].tensors[i].clone();
    for (int j = 1; j < block_.count; ++j) combine(acc, posted_[j].tensors[i], fold);
    nccl_->all_reduce(acc, fold);
    if (first.op == ReduceOp::Avg) {
      if (at::isIntegralType(acc.scalar_type(), /*includeBool=*/true)) {
        acc.div_(nodes_, "trunc");
      } else {
        acc.div_(nodes_);
      }
    }
    result_.push_back(acc);
  }
  nccl_->synchronize();
}
#endif

void HierarchicalGroup::lead_broadcast(Header& mine) {
  const Posted& first = posted_[0];
  const int P = mesh_.size(), me = mesh_.rank();
  const int root_process = dist::process_of_node(first.root, nodes_, P);
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const auto& t : first.tensors) {
    offsets.push_back(total);
    total += aligned(tensor_bytes(t));
  }
  at::Tensor buffer = at::empty({total}, at::kByte);
  if (root_process == me) {
    const Posted& root = posted_[first.root - block_.first];
    for (size_t i = 0; i < root.tensors.size(); ++i) {
      view_of(buffer, offsets[i], root.tensors[i].sizes(), root.tensors[i].scalar_type()).copy_(root.tensors[i]);
    }
    mine.payload = static_cast<uint64_t>(total);
  }
  const auto headers = exchange_headers(mine);
  if (headers[root_process].payload != static_cast<uint64_t>(total)) {
    throw sdk::Error("collective mismatch between processes: " + mesh_.describe(root_process) +
                     " broadcasts a different amount of data than expected");
  }
  mesh_.broadcast(buffer.data_ptr(), static_cast<size_t>(total), root_process);
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    result_.push_back(view_of(buffer, offsets[i], first.tensors[i].sizes(), first.tensors[i].scalar_type()));
  }
  buffers_.push_back(buffer);
}

void HierarchicalGroup::lead_all_gather(Header& mine) {
  const int P = mesh_.size();
  const size_t count = posted_[0].tensors.size();
  // A message: [number of int64 words of metadata][metadata: per node and
  // tensor, dtype, dim, sizes...][data, each tensor aligned].
  std::vector<int64_t> meta;
  int64_t data_bytes = 0;
  for (int j = 0; j < block_.count; ++j) {
    for (const auto& t : posted_[j].tensors) {
      meta.push_back(static_cast<int64_t>(t.scalar_type()));
      meta.push_back(t.dim());
      for (int64_t s : t.sizes()) meta.push_back(s);
      data_bytes += aligned(tensor_bytes(t));
    }
  }
  const int64_t head = aligned(static_cast<int64_t>((meta.size() + 1) * sizeof(int64_t)));
  at::Tensor send = at::empty({head + data_bytes}, at::kByte);
  auto* words = reinterpret_cast<int64_t*>(send.data_ptr<uint8_t>());
  words[0] = static_cast<int64_t>(meta.size());
  std::memcpy(words + 1, meta.data(), meta.size() * sizeof(int64_t));
  int64_t offset = head;
  for (int j = 0; j < block_.count; ++j) {
    for (const auto& t : posted_[j].tensors) {
      view_of(send, offset, t.sizes(), t.scalar_type()).copy_(t);
      offset += aligned(tensor_bytes(t));
    }
  }
  mine.payload = static_cast<uint64_t>(send.numel());
  const auto headers = exchange_headers(mine);

  gather_payloads(send, headers);

  gathered_.assign(nodes_, {});
  for (int q = 0; q < P; ++q) {
    const at::Tensor& buffer = buffers_[q];
    const auto* w = reinterpret_cast<const int64_t*>(buffer.data_ptr<uint8_t>());
    const int64_t words_count = w[0];
    int64_t at_word = 1;
    int64_t data = aligned((words_count + 1) * static_cast<int64_t>(sizeof(int64_t)));
    const dist::NodeBlock block = dist::node_block(nodes_, P, q);
    for (int r = block.first; r < block.first + block.count; ++r) {
      for (size_t i = 0; i < count; ++i) {
        const auto dtype = static_cast<at::ScalarType>(w[at_word++]);
        const int64_t dim = w[at_word++];
        std::vector<int64_t> shape(w + at_word, w + at_word + dim);
        at_word += dim;
        at::Tensor t = view_of(buffer, data, shape, dtype);
        data += aligned(tensor_bytes(t));
        gathered_[r].push_back(t);
      }
    }
    if (at_word != words_count + 1 || data != static_cast<int64_t>(buffer.numel())) {
      throw sdk::Error("all_gather: the data from " + mesh_.describe(q) + " is malformed");
    }
  }
}

}  // namespace exogym::runtime::comm
