// The handle of non-blocking collectives (pending.h), and Communicator's
// defaults for them, which need its complete type.
#include "exogym/sdk/pending.h"

#include <ATen/ATen.h>

#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::sdk {

namespace {

class Completed final : public InFlight {
 public:
  void wait() override {}
  at::Tensor record() const override { return at::empty({0}, at::kDouble); }
};

const std::string kRecord = "work";
const std::string kRecordBefore = "work.before";
const std::string kCount = "layout";
const std::string kArrived = "result.";

const at::Tensor& saved(const StateDict& in, const std::string& key) {
  auto it = in.find(key);
  if (it == in.end()) throw Error("a pending collective's saved state has no \"" + key + "\"");
  return it->second;
}

}  // namespace

std::unique_ptr<InFlight> completed() { return std::make_unique<Completed>(); }

Pending::Pending() = default;
Pending::Pending(std::unique_ptr<InFlight> in_flight, std::vector<at::Tensor> arrived,
                 std::shared_ptr<const detail::Decoding> decoding)
    : in_flight_(std::move(in_flight)), arrived_(std::move(arrived)), decoding_(std::move(decoding)) {}
Pending Pending::decoded_by(std::shared_ptr<const detail::Decoding> decoding) && {
  decoding_ = std::move(decoding);
  return std::move(*this);
}
Pending Pending::and_then(const std::function<Pending(std::vector<at::Tensor>)>& next) && {
  if (!in_flight_) throw Error("and_then() on a Pending that holds no collective");
  EXOGYM_CHECK_INTERNAL(!before_, "and_then() chains two collectives, not three");
  std::vector<at::Tensor> arrived = std::move(arrived_);
  arrived_.clear();
  auto decoding = std::move(decoding_);
  Pending second = next(decoding ? decoding->decode(arrived) : std::move(arrived));
  EXOGYM_CHECK_INTERNAL(second.valid() && !second.before_, "and_then()'s next collective holds no transfer");
  second.before_ = std::move(in_flight_);
  return second;
}

Pending::Pending(Pending&&) noexcept = default;
Pending& Pending::operator=(Pending&&) noexcept = default;
Pending::~Pending() = default;

std::vector<at::Tensor> Pending::wait() {
  if (!in_flight_) {
    throw Error("wait() on a Pending that holds no collective (never started, or waited for already)");
  }
  if (before_) before_->wait();
  before_.reset();
  in_flight_->wait();
  in_flight_.reset();
  std::vector<at::Tensor> arrived = std::move(arrived_);
  arrived_.clear();
  auto decoding = std::move(decoding_);
  return decoding ? decoding->decode(arrived) : arrived;
}

void Pending::save(StateDict& out, const std::string& prefix) const {
  if (!in_flight_) return;
  out[prefix + kRecord] = in_flight_->record();
  if (before_) out[prefix + kRecordBefore] = before_->record();
  out[prefix + kCount] = at::tensor({static_cast<int64_t>(arrived_.size())}, at::kLong);
  for (size_t i = 0; i < arrived_.size(); ++i) out[prefix + kArrived + std::to_string(i)] = arrived_[i];
  if (decoding_) decoding_->save(out, prefix);
}

Pending Pending::load(const StateDict& in, const std::string& prefix, Communicator& comm, c10::Device device) {
  if (in.find(prefix + kRecord) == in.end()) return {};
  const at::Tensor& count = saved(in, prefix + kCount);
  if (count.scalar_type() != at::kLong || count.dim() != 1 || count.numel() != 1 || count.item<int64_t>() < 0)
    throw Error("\"" + prefix + kCount + "\" is not one count");
  auto decoding = detail::load_decoding(in, prefix, device);
  // What a decoding takes (a quantized mean's codes and scales) stays on
  // the CPU; `device` is where its result goes.
  const c10::Device arrived_on = decoding ? c10::Device(c10::kCPU) : device;
  std::vector<at::Tensor> arrived;
  for (int64_t i = 0; i < count.item<int64_t>(); ++i)
    arrived.push_back(
        saved(in, prefix + kArrived + std::to_string(i)).to(arrived_on, /*non_blocking=*/false, /*copy=*/true));
  Pending loaded(comm.resume(saved(in, prefix + kRecord)), std::move(arrived), std::move(decoding));
  auto before = in.find(prefix + kRecordBefore);
  if (before != in.end()) loaded.before_ = comm.resume(before->second);
  return loaded;
}

Pending Communicator::all_reduce_async(const std::vector<at::Tensor>& tensors, ReduceOp op) {
  return {completed(), *all_reduce_shared(tensors, op)};
}

Pending Communicator::all_gather_async(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (auto& from_rank : all_gather(tensors)) flat.insert(flat.end(), from_rank.begin(), from_rank.end());
  return {completed(), std::move(flat)};
}

Pending Communicator::all_to_all_async(const std::vector<at::Tensor>& tensors) {
  const int nodes = size(), me = place();
  if (nodes <= 0 || tensors.size() % static_cast<size_t>(nodes) != 0)
    throw Error("all_to_all_async: " + std::to_string(tensors.size()) + " tensors are not " + std::to_string(nodes) +
                " equal parts, one per node");
  EXOGYM_CHECK_INTERNAL(me >= 0 && me < nodes, "a communicator's place is not among its nodes");
  const size_t m = tensors.size() / static_cast<size_t>(nodes);
  std::vector<at::Tensor> mine;
  for (auto& from_rank : all_gather(tensors)) {
    EXOGYM_CHECK_INTERNAL(from_rank.size() == tensors.size(), "all_gather returned another tensor count");
    mine.insert(mine.end(), from_rank.begin() + static_cast<std::ptrdiff_t>(me * m),
                from_rank.begin() + static_cast<std::ptrdiff_t>((me + 1) * m));
  }
  return {completed(), std::move(mine)};
}

std::unique_ptr<InFlight> Communicator::resume(const at::Tensor& /*record*/) { return completed(); }

}  // namespace exogym::sdk
