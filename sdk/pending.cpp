// The handles of non-blocking collectives (pending.h), and Communicator's
// defaults for them, which need the handles' complete types.
#include "exogym/sdk/pending.h"

#include <ATen/ATen.h>

#include <string>

#include "exogym/sdk/error.h"

namespace exogym::sdk {

namespace {

class CompletedWork final : public Work {
 public:
  void wait() override {}
  at::Tensor record() const override { return at::empty({0}, at::kDouble); }
};

const std::string kRecord = "work";
const std::string kLayout = "layout";
const std::string kResult = "result.";

// The result's tensors in order and, for all_gather, how many each rank
// sent: a Pending's result as flat keys.
void save_flat(StateDict& out, const std::string& prefix, const Work& work, const std::vector<at::Tensor>& flat,
               const std::vector<int64_t>& layout) {
  out[prefix + kRecord] = work.record();
  out[prefix + kLayout] = at::tensor(layout, at::kLong);
  for (size_t i = 0; i < flat.size(); ++i) out[prefix + kResult + std::to_string(i)] = flat[i];
}

const at::Tensor& saved(const StateDict& in, const std::string& key) {
  auto it = in.find(key);
  if (it == in.end()) throw Error("a pending collective's saved state has no \"" + key + "\"");
  return it->second;
}

// The saved record's Work (nullptr when `in` holds no pending collective
// under `prefix`), the layout, and the result's tensors in order, on `device`.
std::unique_ptr<Work> load_flat(const StateDict& in, const std::string& prefix, Communicator& comm, c10::Device device,
                                std::vector<int64_t>& layout, std::vector<at::Tensor>& flat) {
  if (in.find(prefix + kRecord) == in.end()) return nullptr;
  const at::Tensor& shape = saved(in, prefix + kLayout);
  if (shape.scalar_type() != at::kLong || shape.dim() != 1)
    throw Error("\"" + prefix + kLayout + "\" is not a list of counts");
  const at::Tensor counts = shape.contiguous();
  layout.assign(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  int64_t total = 0;
  for (int64_t n : layout) {
    if (n < 0) throw Error("\"" + prefix + kLayout + "\" holds a negative count");
    total += n;
  }
  flat.clear();
  for (int64_t i = 0; i < total; ++i)
    flat.push_back(saved(in, prefix + kResult + std::to_string(i)).to(device, /*non_blocking=*/false, /*copy=*/true));
  return comm.resume_work(saved(in, prefix + kRecord));
}

}  // namespace

std::unique_ptr<Work> completed_work() { return std::make_unique<CompletedWork>(); }

namespace detail {

void save_pending(StateDict& out, const std::string& prefix, const Work& work, const std::vector<at::Tensor>& result) {
  save_flat(out, prefix, work, result, {static_cast<int64_t>(result.size())});
}

void save_pending(StateDict& out, const std::string& prefix, const Work& work, const SharedTensors& result) {
  static const std::vector<at::Tensor> none;
  save_pending(out, prefix, work, result ? *result : none);
}

void save_pending(StateDict& out, const std::string& prefix, const Work& work,
                  const std::vector<std::vector<at::Tensor>>& result) {
  std::vector<at::Tensor> flat;
  std::vector<int64_t> layout;
  for (const auto& from_rank : result) {
    layout.push_back(static_cast<int64_t>(from_rank.size()));
    flat.insert(flat.end(), from_rank.begin(), from_rank.end());
  }
  save_flat(out, prefix, work, flat, layout);
}

std::unique_ptr<Work> load_pending(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   c10::Device device, std::vector<at::Tensor>& result) {
  std::vector<int64_t> layout;
  auto work = load_flat(in, prefix, comm, device, layout, result);
  if (work && layout.size() != 1) throw Error("\"" + prefix + kLayout + "\" is not one count");
  return work;
}

std::unique_ptr<Work> load_pending(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   c10::Device device, SharedTensors& result) {
  std::vector<at::Tensor> tensors;
  auto work = load_pending(in, prefix, comm, device, tensors);
  if (work) result = std::make_shared<const std::vector<at::Tensor>>(std::move(tensors));
  return work;
}

std::unique_ptr<Work> load_pending(const StateDict& in, const std::string& prefix, Communicator& comm,
                                   c10::Device device, std::vector<std::vector<at::Tensor>>& result) {
  std::vector<int64_t> layout;
  std::vector<at::Tensor> flat;
  auto work = load_flat(in, prefix, comm, device, layout, flat);
  result.clear();
  size_t next = 0;
  for (int64_t n : layout) {
    result.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(next),
                        flat.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(n)));
    next += static_cast<size_t>(n);
  }
  return work;
}

void throw_nothing_pending() {
  throw Error("wait() on a Pending that holds no collective (never started, or waited for already)");
}

}  // namespace detail

PendingTensors Communicator::all_reduce_async(std::vector<at::Tensor> tensors, ReduceOp op) {
  all_reduce(tensors, op);
  return {completed_work(), std::move(tensors)};
}

PendingShared Communicator::all_reduce_shared_async(const std::vector<at::Tensor>& tensors, ReduceOp op) {
  return {completed_work(), all_reduce_shared(tensors, op)};
}

PendingTensors Communicator::broadcast_async(std::vector<at::Tensor> tensors, int root) {
  broadcast(tensors, root);
  return {completed_work(), std::move(tensors)};
}

PendingGather Communicator::all_gather_async(const std::vector<at::Tensor>& tensors) {
  return {completed_work(), all_gather(tensors)};
}

std::unique_ptr<Work> Communicator::resume_work(const at::Tensor& /*record*/) { return completed_work(); }

}  // namespace exogym::sdk
