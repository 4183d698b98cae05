// The work of a stack's meeting (StackGroup::compute): the live members'
// forward and backward over the stacks and, where every computing node's
// strategy takes its local step first thing after the backward
// (sdk::StackedSteps::take_after_backward), their local steps too, in parts
// of the stack: each part's forward, backward and local step in a row, so
// that only the parts in work have gradients alive and each part's tensors
// are still in the CPU's caches when it steps. On the CPU the parts compute
// side by side, a part per compute slot at a time.
#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>

#include "exogym/runtime/host/block_cache.h"
#include "exogym/runtime/host/malloc_tuning.h"
#include "exogym/runtime/train/autocast_scope.h"
#include "exogym/runtime/train/model_state.h"
#include "exogym/runtime/train/stack_group.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/local_step.h"
#include "exogym/sdk/stacked.h"

namespace exogym::runtime::train {

namespace {

// Whether every member's micro-batches have the same fields, shapes and
// dtypes, so that they stack.
bool same_shapes(const std::vector<const std::vector<sdk::Batch>*>& batches, const std::vector<int>& members) {
  const std::vector<sdk::Batch>& first = *batches[static_cast<size_t>(members.front())];
  for (int i : members) {
    const std::vector<sdk::Batch>& mine = *batches[static_cast<size_t>(i)];
    if (mine.size() != first.size()) return false;
    for (size_t j = 0; j < mine.size(); ++j) {
      if (mine[j].size() != first[j].size()) return false;
      for (const auto& [key, tensor] : first[j]) {
        auto it = mine[j].find(key);
        if (it == mine[j].end() || it->second.sizes() != tensor.sizes() ||
            it->second.scalar_type() != tensor.scalar_type())
          return false;
      }
    }
  }
  return true;
}

// The members' j-th micro-batches as one, each field stacked along a new
// dim 0 in the members' order.
sdk::Batch stacked_batch(const std::vector<const std::vector<sdk::Batch>*>& batches, const std::vector<int>& members,
                         size_t j) {
  sdk::Batch batch;
  for (const auto& item : (*batches[static_cast<size_t>(members.front())])[j]) {
    std::vector<at::Tensor> parts;
    for (int i : members) parts.push_back((*batches[static_cast<size_t>(i)])[j].at(item.first));
    batch[item.first] = at::stack(parts);
  }
  return batch;
}

// EXOGYM_STACK_PART_BYTES, the user's bound on a part's gradients, if set.
std::optional<size_t> chosen_part_bytes() {
  const char* text = std::getenv("EXOGYM_STACK_PART_BYTES");
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0' || value == 0 || text[0] == '-')
    throw sdk::Error(std::string("EXOGYM_STACK_PART_BYTES must be a positive number of bytes, got \"") + text + "\"");
  return static_cast<size_t>(value);
}

}  // namespace

int stack_part_size(int members, size_t node_gradient_bytes, int compute_slots) {
  // A GPU computes the whole stack at once: its launches are the cost.
  if (node_gradient_bytes == 0) return members;
  const std::optional<size_t> chosen = chosen_part_bytes();
  // A size of the user's is the only bound; ours leaves every compute slot a part.
  const int slots = std::max(1, std::min(compute_slots, members));
  const int most = chosen ? members : (members + slots - 1) / slots;
  const auto fitting = static_cast<int64_t>(chosen.value_or(kStackPartGradientBytes) / node_gradient_bytes);
  return static_cast<int>(std::clamp<int64_t>(fitting, 1, most));
}

void StackGroup::take_after_backward(int rank, int64_t t, sdk::LocalStep& step) {
  const auto index = static_cast<size_t>(member(rank));
  announced_[index] = &step;
  announced_in_[index] = t;
}

void StackGroup::compute() {
  if (!set_up_ && cpu_gradient_bytes() > 0) {
    // Every member has set up: what the set-up freed, blocks of a node's
    // sizes, goes back to the kernel (the replicas' own tensors that the
    // stacks replaced among them). Nodes computing per node would take
    // those blocks again for their moments; a stack's moments, of stacks'
    // sizes, could not, and the freed memory stayed resident beside them
    // (0.8 GB at 1,024 MLP nodes).
    host::release_kept_blocks();
    host::return_free_heap_memory();
  }
  first_step_ = !set_up_;
  set_up_ = true;
  // The local steps announced for this step: taken here, or by the nodes.
  const std::vector<sdk::LocalStep*> announced = announced_;
  std::fill(announced_.begin(), announced_.end(), nullptr);
  // The live members that brought micro-batches: a node idling through the
  // step (Strategy::computes) brought none.
  computing_.clear();
  for (int i : live_)
    if (!batches_[static_cast<size_t>(i)]->empty()) computing_.push_back(i);
  if (computing_.empty()) return;
  // Nodes whose batches differ in shape (a per-node dataset, say) compute
  // one after the other, each with its own replica.
  if (!same_shapes(batches_, computing_)) return compute_apart(computing_);
  const int64_t t = announced_in_[static_cast<size_t>(computing_.front())];
  const bool steps_follow = std::all_of(computing_.begin(), computing_.end(), [&](int i) {
    return announced[static_cast<size_t>(i)] && announced_in_[static_cast<size_t>(i)] == t;
  });
  if (!steps_follow) {
    // Every node's gradients wait for the step meeting.
    if (!gradient_room_ && cpu_gradient_bytes() > 0)
      gradient_room_ = std::make_unique<host::BlockCacheRoom>(cpu_gradient_bytes());
    return compute_fitting(computing_, nullptr, t);
  }
  // The computing members (ascending) by the fixed row range of their part.
  const int part_size = std::max(1, this->part_size());
  std::vector<std::vector<int>> parts;
  for (size_t j = 0; j < computing_.size(); ++j) {
    if (j == 0 || computing_[j] / part_size != computing_[j - 1] / part_size) parts.emplace_back();
    parts.back().push_back(computing_[j]);
  }
  if (parts.size() > 1 && device().is_cpu() && fitted_because_.empty()) {
    // A CPU's parts (where no pass ran out of memory) compute side by side,
    // a part per compute slot, each on one thread from its forward to its
    // step: no thread waits for the others between layers, and a part's
    // tensors stay in its core's caches (against the parts one after the
    // other, each layer shared among the slots: 8 nanoGPT nodes 13-31 %
    // faster, 4,096 MLP nodes 17-19 %). Each node's arithmetic is the same
    // on any thread.
    std::vector<std::string> apart(parts.size());  // why not together ("": they were)
    const at::ThreadLocalState state;              // the worker's grad mode
    crew_->run(static_cast<int64_t>(parts.size()), [&](int64_t p) {
      const sdk::NodeWorkersScope alone(nullptr);
      at::ThreadLocalStateGuard guard(state);
      const auto at = static_cast<size_t>(p);
      compute_part(parts[at]);
      apart[at] = step_part(parts[at], announced, t);
    });
    for (size_t p = 0; p < parts.size(); ++p) count_part_steps(parts[p], apart[p]);
  } else {
    for (const auto& part : parts) compute_fitting(part, &announced, t);
  }
  // No member comes to the step meeting in step t: each takes its own step
  // where its part's was not taken here (an idle node, say).
  for (int i : live_) arrived_in_[static_cast<size_t>(i)] = t;
}

void StackGroup::count_part_steps(const std::vector<int>& part, const std::string& apart) {
  const auto nodes = static_cast<int64_t>(part.size());
  if (!apart.empty()) {
    steps_apart_ += nodes;
    if (apart_because_.empty()) apart_because_ = apart;
    return;  // the nodes take their own steps, with their gradients
  }
  steps_together_ += nodes;
  steps_after_backward_ += nodes;
}

void StackGroup::compute_fitting(const std::vector<int>& members, const std::vector<sdk::LocalStep*>* announced,
                                 int64_t t) {
  const size_t most = static_cast<size_t>(fitting_.load());
  if (members.size() > most) {
    for (size_t from = 0; from < members.size(); from += most) {
      const auto begin = members.begin() + static_cast<std::ptrdiff_t>(from);
      compute_fitting({begin, begin + static_cast<std::ptrdiff_t>(std::min(most, members.size() - from))}, announced,
                      t);
    }
    return;
  }
  // What a pass changes before it may run out of memory: the members'
  // generators (dropout) and buffer rows (batch norm's statistics).
  const bool may_refit = first_step_ && members.size() > 1;
  std::vector<at::Generator> generators;
  std::vector<at::Tensor> buffers;
  at::Tensor index;
  if (may_refit) {
    at::NoGradGuard no_grad;
    for (int i : members) {
      const at::Generator& g = generators_[static_cast<size_t>(i)];
      generators.push_back(g.defined() ? g.clone() : g);
    }
    index = at::tensor(std::vector<int64_t>(members.begin(), members.end()), at::kLong).to(device());
    for (const Stacked& b : buffers_) buffers.push_back(b.stack.index_select(0, index));
  }
  bool refit = false;
  try {
    compute_part(members);
  } catch (...) {
    if (!may_refit || !util::current_exception_is_out_of_memory()) throw;
    refit = true;  // the pass's tensors are gone with its frames
    if (fitted_because_.empty())
      fitted_because_ = "a pass of " + std::to_string(members.size()) + " nodes ran out of memory on " +
                        device().str() + " in the first step (" + util::current_exception_text() + ")";
  }
  if (!refit) {
    if (announced) count_part_steps(members, step_part(members, *announced, t));
    return;
  }
  {
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < members.size(); ++k)
      if (generators[k].defined()) generators_[static_cast<size_t>(members[k])].set_state(generators[k].get_state());
    for (size_t b = 0; b < buffers_.size(); ++b) buffers_[b].stack.index_copy_(0, index, buffers[b]);
  }
  const size_t half = (members.size() + 1) / 2;
  fitting_ = std::min(fitting_.load(), static_cast<int>(half));
  if (auto log = spdlog::get("exogym"))
    log->warn("a stack's pass of {} nodes ran out of memory on {} in the first step: it computes at most {} at once",
              members.size(), device().str(), half);
  compute_fitting(members, announced, t);  // in passes of fitting_ now
}

std::string StackGroup::step_part(const std::vector<int>& part, const std::vector<sdk::LocalStep*>& announced,
                                  int64_t t) {
  std::string apart;
  std::vector<sdk::LocalStep*> steps;
  for (int i : part) {
    // The node checks its loss before its step (train.stop_on_nonfinite).
    if (!std::isfinite(losses_[static_cast<size_t>(i)])) apart = "a node's training loss is not finite";
    steps.push_back(announced[static_cast<size_t>(i)]);
  }
  if (apart.empty()) apart = step_stacked(steps);
  if (!apart.empty()) return apart;
  for (int i : part) {
    taken_[static_cast<size_t>(i)] = announced[static_cast<size_t>(i)];
    taken_in_[static_cast<size_t>(i)] = t;
    // As LocalStep::step releases them: the next part's take their memory.
    for (Stacked& p : parameters_)
      if (p.trainable) p.rows[static_cast<size_t>(i)].mutable_grad().reset();
  }
  return "";
}

void StackGroup::compute_part(const std::vector<int>& members) {
  const int64_t n = static_cast<int64_t>(members.size());
  // Consecutive members' rows are views of the stacks; others are gathered.
  const bool consecutive = members.back() - members.front() + 1 == n;
  const c10::Device device = this->device();
  at::Tensor index;
  if (!consecutive) index = at::tensor(std::vector<int64_t>(members.begin(), members.end()), at::kLong).to(device);
  const auto rows_of = [&](const at::Tensor& stack) {
    return consecutive ? stack.narrow(0, members.front(), n) : stack.index_select(0, index);
  };

  // The members' rows, as fresh leaves each step, whose gradients become
  // the nodes'.
  sdk::Stack view;
  std::vector<at::Tensor> leaves, buffer_rows;
  {
    at::NoGradGuard no_grad;
    for (const Stacked& p : parameters_) {
      // Its own version counter: the stack's other parts may step (in
      // place) while this part's graph holds its rows.
      at::Tensor leaf = rows_of(p.stack).variable_data();
      if (p.trainable) leaf.requires_grad_(true);
      for (const auto& name : p.names) view.parameters[name] = leaf;
      leaves.push_back(leaf);
    }
    for (const Stacked& b : buffers_) {
      at::Tensor rows = consecutive ? rows_of(b.stack).variable_data() : rows_of(b.stack);
      for (const auto& name : b.names) view.buffers[name] = rows;
      buffer_rows.push_back(rows);
    }
  }
  for (int i : members) {
    view.generators.push_back(generators_[static_cast<size_t>(i)]);
    losses_[static_cast<size_t>(i)] = 0;
  }
  sdk::Model& model = *models_[static_cast<size_t>(members.front())];
  const size_t micro = batches_[static_cast<size_t>(members.front())]->size();
  // The micro-batches' losses add up where they were computed and come to
  // the host once a step: on a GPU a read-back per micro-batch would make the
  // host wait for each before it launches the next. Adding in double from the
  // first loss on is the host's sum, bit for bit.
  at::Tensor loss_sum;
  for (size_t j = 0; j < micro; ++j) {
    const sdk::Batch batch = stacked_batch(batches_, members, j);
    at::Tensor loss;
    {
      AutocastScope autocast(precision_, device.type());
      loss = model.stacked_loss(view, batch);
    }
    if (loss.dim() != 1 || loss.size(0) != n)
      throw sdk::Error("stacked_loss() must return one loss per node, shape [" + std::to_string(n) + "], got " +
                       sdk::shape_of(loss));
    loss.sum().backward();
    const at::Tensor part = loss.detach().to(at::kDouble);
    loss_sum = loss_sum.defined() ? loss_sum + part : part;
  }
  if (loss_sum.defined()) {
    const at::Tensor host = loss_sum.to(at::kCPU).contiguous();
    for (int64_t k = 0; k < n; ++k) losses_[static_cast<size_t>(members[k])] = host.data_ptr<double>()[k];
  }
  average_micro_batch_gradients(leaves, static_cast<int64_t>(micro));
  at::NoGradGuard no_grad;
  if (!consecutive) {
    for (size_t b = 0; b < buffers_.size(); ++b) buffers_[b].stack.index_copy_(0, index, buffer_rows[b]);
  }
  for (size_t p = 0; p < parameters_.size(); ++p) {
    if (!leaves[p].grad().defined()) continue;
    const at::Tensor grad = leaves[p].grad();
    for (int64_t k = 0; k < n; ++k)
      parameters_[p].rows[static_cast<size_t>(members[k])].mutable_grad() = grad.select(0, k);
  }
}

void StackGroup::compute_apart(const std::vector<int>& members) {
  for (int i : members) {
    sdk::Model& model = *models_[static_cast<size_t>(i)];
    const c10::Device device = this->device();
    double sum = 0;
    for (const sdk::Batch& batch : *batches_[static_cast<size_t>(i)]) {
      at::Tensor loss;
      {
        AutocastScope autocast(precision_, device.type());
        loss = model.loss(batch);
      }
      if (loss.numel() != 1)
        throw sdk::Error("loss() must return a scalar, got shape " + std::to_string(loss.dim()) + "-D");
      loss.backward();
      sum += loss.item<double>();
    }
    losses_[static_cast<size_t>(i)] = sum;
    average_micro_batch_gradients(model.network().parameters(),
                                  static_cast<int64_t>(batches_[static_cast<size_t>(i)]->size()));
  }
}

}  // namespace exogym::runtime::train
