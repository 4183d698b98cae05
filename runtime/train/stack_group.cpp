#include "exogym/runtime/train/stack_group.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <utility>

#include "exogym/runtime/comm/meeting_point.h"
#include "exogym/runtime/host/block_cache.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/threads/work_crew.h"
#include "exogym/runtime/threads/worker_thread.h"
#include "exogym/runtime/train/autocast_scope.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/local_step.h"
#include "exogym/sdk/stacked.h"

namespace exogym::runtime::train {

namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

Named named_tensors(sdk::Model& model, bool parameters) {
  Named out;
  auto& net = model.network();
  if (parameters) {
    for (const auto& item : net.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  } else {
    for (const auto& item : net.named_buffers(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  }
  return out;
}

// The helper threads that join the worker thread in its layers' and local
// steps' per-node work.
class CrewWorkers : public sdk::NodeWorkers {
 public:
  CrewWorkers(int helpers, int intra_op_threads) : crew_(helpers, intra_op_threads) {}
  void run(int64_t count, const std::function<void(int64_t)>& item) override { crew_.run(count, item); }

 private:
  threads::WorkCrew crew_;
};

std::string describe(const at::Tensor& t) {
  return sdk::shape_of(t) + " " + c10::toString(t.scalar_type()) + " on " + t.device().str();
}

}  // namespace

std::optional<std::string> replicas_differ(const Replicas& replicas, const std::vector<int>& ranks) {
  sdk::Model& first = *replicas.models[static_cast<size_t>(ranks.front())];
  for (bool parameters : {true, false}) {
    const Named reference = named_tensors(first, parameters);
    for (size_t i = 1; i < ranks.size(); ++i) {
      const Named other = named_tensors(*replicas.models[static_cast<size_t>(ranks[i])], parameters);
      const std::string node = "node " + std::to_string(ranks[i]) + "'s ";
      if (other.size() != reference.size())
        return node + "model has " + std::to_string(other.size()) + " tensors where node " +
               std::to_string(ranks.front()) + "'s has " + std::to_string(reference.size());
      for (size_t j = 0; j < other.size(); ++j) {
        const at::Tensor &a = reference[j].second, &b = other[j].second;
        if (other[j].first != reference[j].first || a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type() ||
            a.device() != b.device())
          return node + "\"" + other[j].first + "\" is " + describe(b) + ", node " + std::to_string(ranks.front()) +
                 "'s \"" + reference[j].first + "\" " + describe(a);
      }
    }
  }
  return std::nullopt;
}

StackGroup::StackGroup(Replicas& replicas, std::vector<int> ranks) : ranks_(std::move(ranks)) {
  for (int rank : ranks_) {
    models_.push_back(replicas.models[static_cast<size_t>(rank)].get());
    generators_.push_back(models_.back()->generator());
  }
  at::NoGradGuard no_grad;
  for (bool parameters : {true, false}) {
    std::vector<Named> by_member;
    for (sdk::Model* model : models_) by_member.push_back(named_tensors(*model, parameters));
    std::vector<Stacked>& stacked = parameters ? parameters_ : buffers_;
    // A tensor the network lists under two names (tied weights) is one
    // stack under both.
    std::map<const void*, size_t> seen;
    for (size_t j = 0; j < by_member.front().size(); ++j) {
      const at::Tensor& own = by_member.front()[j].second;
      auto known = seen.find(own.unsafeGetTensorImpl());
      if (known != seen.end()) {
        stacked[known->second].names.push_back(by_member.front()[j].first);
        continue;
      }
      Stacked s;
      s.names.push_back(by_member.front()[j].first);
      s.trainable = parameters && own.requires_grad();
      std::vector<at::Tensor> rows;
      for (const Named& named : by_member) rows.push_back(named[j].second.detach());
      s.stack = at::stack(rows);
      // One tensor at a time: each replica's own storage is let go as its
      // view takes its place, so the stacks never hold a second copy.
      for (size_t k = 0; k < by_member.size(); ++k) {
        at::Tensor node_tensor = by_member[k][j].second;
        node_tensor.set_data(s.stack.select(0, static_cast<int64_t>(k)));
        s.rows.push_back(node_tensor);
      }
      seen.emplace(own.unsafeGetTensorImpl(), stacked.size());
      stacked.push_back(std::move(s));
    }
  }
}

StackGroup::~StackGroup() { disconnect(); }

size_t StackGroup::cpu_gradient_bytes() const {
  size_t bytes = 0;
  for (const Stacked& p : parameters_)
    if (p.trainable && p.stack.device().is_cpu()) bytes += p.stack.nbytes();
  return bytes;
}

int StackGroup::member(int rank) const {
  return static_cast<int>(std::lower_bound(ranks_.begin(), ranks_.end(), rank) - ranks_.begin());
}

void StackGroup::connect(Cluster& cluster, manifest::Precision precision, int intra_op_threads, int compute_slots) {
  const int members = static_cast<int>(ranks_.size());
  cluster_ = &cluster;
  precision_ = precision;
  batches_.assign(static_cast<size_t>(members), nullptr);
  announced_.assign(static_cast<size_t>(members), nullptr);
  taken_.assign(static_cast<size_t>(members), nullptr);
  announced_in_.assign(static_cast<size_t>(members), -1);
  taken_in_.assign(static_cast<size_t>(members), -1);
  part_size_ = stack_part_size(members, cpu_gradient_bytes() / static_cast<size_t>(members), compute_slots);
  losses_.assign(static_cast<size_t>(members), 0.0);
  live_.clear();
  for (int i = 0; i < members; ++i) live_.push_back(i);
  worker_ = std::make_unique<threads::WorkerThread>(intra_op_threads);
  // While the stack computes, its nodes wait and leave their compute slots
  // to it: the worker and compute_slots - 1 helpers. (Where other stacks or
  // nodes apart take the slots meanwhile, more threads than slots run for a
  // while; no bit depends on how many.)
  crew_ = std::make_unique<CrewWorkers>(std::min(compute_slots, members) - 1, intra_op_threads);
  meeting_ = std::make_unique<comm::MeetingPoint>(
      members, ranks_.front(), cluster.abort_signal(), [this](const comm::MeetingPoint::Calls&) {
        const auto start = std::chrono::steady_clock::now();
        // The model's errors go to a node, not to the
        // meeting, which would make them all internal.
        worker_->run([this] {
          try {
            const sdk::NodeWorkersScope workers(crew_.get());
            compute();
          } catch (...) {
            error_ = util::current_exception_is_out_of_memory() ? out_of_memory() : std::current_exception();
          }
        });
        seconds_each_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                        static_cast<double>(std::max<size_t>(1, computing_.size()));
        std::vector<int> ranks;
        for (int i : live_) ranks.push_back(ranks_[i]);
        cluster_->leave_all_elsewhere(ranks);
      });
  steps_.assign(static_cast<size_t>(members), nullptr);
  arrived_in_.assign(static_cast<size_t>(members), -1);
  step_meeting_ = std::make_unique<comm::MeetingPoint>(
      members, ranks_.front(), cluster.abort_signal(), [this](const comm::MeetingPoint::Calls&) {
        const auto start = std::chrono::steady_clock::now();
        std::vector<sdk::LocalStep*> steps;
        std::vector<int> ranks;
        for (int i : live_) {
          if (steps_[static_cast<size_t>(i)]) steps.push_back(steps_[static_cast<size_t>(i)]);
          ranks.push_back(ranks_[static_cast<size_t>(i)]);
        }
        if (steps.empty()) no_local_steps_ = true;
        // Only all of them: a node that brought none takes no step.
        std::string apart = "a node of the stack took no local step";
        if (!steps.empty() && steps.size() == live_.size()) {
          worker_->run([&] {
            try {
              const sdk::NodeWorkersScope workers(crew_.get());
              apart = step_stacked(steps);
            } catch (...) {
              error_ = std::current_exception();
            }
          });
        }
        steps_taken_ = apart.empty();
        (steps_taken_ ? steps_together_ : steps_apart_) += static_cast<int64_t>(steps.size());
        if (!steps_taken_ && !steps.empty() && apart_because_.empty()) apart_because_ = apart;
        step_seconds_each_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                             static_cast<double>(live_.size());
        cluster_->leave_all_elsewhere(ranks);
      });
  cluster.add_members_listener([this](const std::vector<int>& live) { set_live(live); });
}

void StackGroup::disconnect() {
  step_meeting_.reset();
  meeting_.reset();
  worker_.reset();
  crew_.reset();
  cluster_ = nullptr;
}

void StackGroup::set_live(const std::vector<int>& live) {
  std::vector<int> members;
  for (size_t i = 0; i < ranks_.size(); ++i)
    if (std::binary_search(live.begin(), live.end(), ranks_[i])) members.push_back(static_cast<int>(i));
  meeting_->set_expected(members);
  step_meeting_->set_expected(members);
  live_ = std::move(members);
}

double StackGroup::forward_backward(int rank, const std::vector<sdk::Batch>& micro_batches, threads::NodeSlot* slot,
                                    sim::NodeMeter& meter) {
  const int index = member(rank);
  batches_[static_cast<size_t>(index)] = &micro_batches;
  meter.pause_compute();
  cluster_->enter_elsewhere(rank, "waits for its stack's forward and backward");
  meeting_->meet(index, comm::CollectiveCall(), slot);
  batches_[static_cast<size_t>(index)] = nullptr;
  if (error_) throw_error_of(rank, "the forward and backward (or the local steps after them)");
  meter.resume_compute(seconds_each_);
  return losses_[static_cast<size_t>(index)];
}

c10::Device StackGroup::device() const {
  return parameters_.empty() ? c10::Device(c10::kCPU) : parameters_.front().stack.device();
}

std::exception_ptr StackGroup::out_of_memory() const {
  const size_t nodes = computing_.size();
  const int part = part_size();
  const bool in_parts = static_cast<size_t>(part) < nodes;
  return std::make_exception_ptr(sdk::Error(
      "the stack's forward and backward ran out of memory on " + device().str() + ", computing its " +
      std::to_string(nodes) + " nodes " + (in_parts ? "in parts of " + std::to_string(part) : "at once") + " (" +
      util::current_exception_text() +
      "). A stack holds the activations of the nodes it computes together, where per node only the nodes "
      "computing at the moment hold theirs: set a smaller train.minibatch_size (the batch in micro-batches), "
      "or \"execution\": \"per_node\" (docs/performance.md#stacked-memory)"));
}

std::string StackGroup::step_stacked(const std::vector<sdk::LocalStep*>& steps) const {
  try {
    return sdk::LocalStep::step_together(steps);
  } catch (...) {
    if (!util::current_exception_is_out_of_memory()) throw;
    // The moments are [K, ...] stacks, the K nodes' own as per node, so
    // per node would not fit either.
    throw sdk::Error("the stack's local step of " + std::to_string(steps.size()) + " nodes ran out of memory on " +
                     device().str() + " (" + util::current_exception_text() +
                     "). It holds the nodes' optimizer state, their moments as [K, ...] stacks, which per node "
                     "take the same memory: the device needs fewer nodes (more processes or devices: "
                     "docs/multiprocess.md), a smaller model, or an optimizer with less state");
  }
}

void StackGroup::throw_error_of(int rank, const std::string& what) {
  if (!error_taken_.exchange(true)) std::rethrow_exception(error_);
  throw sdk::AbortedError("run aborted: " + what + " of node " + std::to_string(rank) + "'s stack failed");
}

bool StackGroup::take_step(int rank, int64_t t, sdk::LocalStep& step, threads::NodeSlot* slot, sim::NodeMeter& meter) {
  const int index = member(rank);
  // Taken right after the backward (stack_compute.cpp), once.
  if (taken_in_[static_cast<size_t>(index)] == t && taken_[static_cast<size_t>(index)] == &step) {
    taken_in_[static_cast<size_t>(index)] = -1;
    return true;
  }
  // A second local step in one step is the node's own.
  if (no_local_steps_ || arrived_in_[static_cast<size_t>(index)] == t) return false;
  return meet_for_step(index, t, &step, slot, meter);
}

void StackGroup::end_step(int rank, int64_t t, threads::NodeSlot* slot, sim::NodeMeter& meter) {
  const int index = member(rank);
  // A node whose strategy took no local step still comes, so that the
  // others are not left waiting for it.
  if (no_local_steps_ || arrived_in_[static_cast<size_t>(index)] == t) return;
  meet_for_step(index, t, nullptr, slot, meter);
}

bool StackGroup::meet_for_step(int index, int64_t t, sdk::LocalStep* step, threads::NodeSlot* slot,
                               sim::NodeMeter& meter) {
  const int rank = ranks_[static_cast<size_t>(index)];
  steps_[static_cast<size_t>(index)] = step;
  arrived_in_[static_cast<size_t>(index)] = t;
  meter.pause_compute();
  cluster_->enter_elsewhere(rank, "waits for its stack's local step");
  step_meeting_->meet(index, comm::CollectiveCall(), slot);
  steps_[static_cast<size_t>(index)] = nullptr;
  if (error_) throw_error_of(rank, "the local step");
  meter.resume_compute(step_seconds_each_);
  return steps_taken_;
}

}  // namespace exogym::runtime::train
