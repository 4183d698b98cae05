#include "exogym/runtime/train/node_loop.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exogym/runtime/checkpoint/stop_vote.h"
#include "exogym/runtime/host/devices.h"
#include "exogym/runtime/host/interrupt.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/sim/metered_communicator.h"
#include "exogym/runtime/train/autocast_scope.h"
#include "exogym/runtime/train/checkpointing.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/train/divergence.h"
#include "exogym/runtime/train/evaluation.h"
#include "exogym/runtime/train/model_state.h"
#include "exogym/runtime/train/reports.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"

namespace exogym::runtime::train {

namespace {

std::string plugin_name(const char* kind, const std::string& name, const plugin::LoadedPlugin& plugin) {
  return std::string(kind) + " \"" + name + "\" (" + plugin.description().file.string() + ")";
}

// One node's run, on its own thread. `phase_` says what the node is doing,
// for the error that stops the run if it fails.
class NodeRun {
 public:
  NodeRun(TrainingState& s, train::Cluster& cluster, int rank, threads::NodeSlot& slot);
  void run();

 private:
  void start();
  void restore();
  // Before step t when the membership changes (membership.h): every node
  // meets; a donor first leaves its state, a node coming back then takes it.
  void change_membership(int64_t t);
  void train_step(int64_t t);
  // What every node does at the start of step t, down or not: the step
  // index, and the check for Ctrl-C (the first node to see the request
  // stops the others at their next collective; with checkpoints boundary()
  // stops them instead). All a down node does.
  void start_step(int64_t t);
  // Where every node of the run meets (the checkpoints): the collective
  // backend's barrier, or with failures one that down nodes attend too.
  // `work` is done once per process while its nodes are there.
  void meet_every_node(const std::function<void()>& work = {});
  // After the last step before boundary `step` (steps done): a checkpoint
  // when one is due or a stop was requested; then, if stopping, stops.
  void boundary(int64_t step);
  void write_checkpoint(int64_t step);
  // The step's loss: the mean over its micro-batches (as their gradients).
  double forward_backward(const std::vector<int64_t>& indices);
  void report_step(int64_t t, double loss);
  void finish();

  TrainingState& s_;
  const manifest::Manifest& m_;
  train::Cluster& cluster_;
  Membership& membership_;
  const int rank_;
  threads::NodeSlot& slot_;
  sdk::Model& model_;
  sdk::Strategy& strategy_;
  const std::unique_ptr<sdk::Communicator> backend_;
  sim::NodeMeter& meter_;
  // What the strategy sends is metered as traffic a real cluster would carry;
  // the runtime's own collectives are counted apart and cost no simulated time.
  sim::MeteredCommunicator strategy_comm_, runtime_comm_;
  const c10::Device device_;
  NodeSharedObjects shared_;
  sdk::NodeContext ctx_;  // the strategy keeps a reference from init() on
  const std::string strategy_name_, model_name_;
  std::string phase_ = "initial broadcast";
  double last_loss_ = NAN;  // this node's, for the warning when it turns non-finite
};

NodeRun::NodeRun(TrainingState& s, train::Cluster& cluster, int rank, threads::NodeSlot& slot)
    : s_(s),
      m_(s.m),
      cluster_(cluster),
      membership_(*s.membership),
      rank_(rank),
      slot_(slot),
      model_(*s.replicas.models[rank]),
      strategy_(*s.replicas.strategies[rank]),
      backend_(cluster.communicator(rank, &slot)),
      meter_(s.simulation->meter(rank)),
      strategy_comm_(*backend_, meter_, sim::TrafficSource::Strategy,
                     membership_.simulated() ? &membership_.live() : nullptr),
      runtime_comm_(*backend_, meter_, sim::TrafficSource::Runtime,
                    membership_.simulated() ? &membership_.live() : nullptr),
      device_(host::device_for_node(s.devices, rank)),
      shared_(s.shared),
      strategy_name_(plugin_name("strategy", m_.strategy.plugin, *s.plugins.strategy)),
      model_name_(plugin_name("model", m_.model.plugin, *s.plugins.model)) {
  ctx_.rank = rank;
  ctx_.num_nodes = m_.nodes;
  ctx_.live = &membership_.live();
  ctx_.membership_epoch = membership_.epoch();
  ctx_.device = device_;
  ctx_.comm = &strategy_comm_;
  ctx_.step = 0;
  ctx_.max_steps = m_.max_steps;
  ctx_.seed = m_.seed;
  ctx_.log = s.log;
  ctx_.metrics = s.metric_sink();
  ctx_.shared = &shared_;
}

void NodeRun::run() {
  try {
    start();
    s_.nodes_started.fetch_add(1);
    s_.loop.note_start();
    for (int64_t t = s_.first_step; t < m_.max_steps; ++t) {
      if (membership_.meets_before(t)) change_membership(t);
      if (membership_.is_live(rank_))
        train_step(t);
      else
        start_step(t);
      if (t == s_.loop.mark_step) s_.loop.note_mark();
      boundary(t + 1);
    }
    s_.loop.note_end();
    if (membership_.is_live(rank_)) finish();
  } catch (const sdk::AbortedError&) {
    throw;
  } catch (const host::Interrupted&) {
    throw;
  } catch (const Diverged&) {
    throw;  // it names the node and step already; training.cpp marks the summary
  } catch (const sdk::ConfigError& e) {
    // A plugin's ConfigError (init() checking its options, say) is the user's: at its options, exit 2, where found.
    const bool model = phase_.find(model_name_) != std::string::npos;
    if (!model && phase_.find(strategy_name_) == std::string::npos) throw;  // the runtime's own, with its path
    const sdk::ConfigError at = at_options(model ? m_.model : m_.strategy, e);
    throw sdk::ConfigError(at.path(), at.message() + " (found by node " + std::to_string(rank_) + " at step " +
                                          std::to_string(ctx_.step) + ", " + phase_ + ")");
  } catch (...) {
    // Anything a plugin throws, `throw 42` included, stops the run cleanly.
    throw sdk::Error("node " + std::to_string(rank_) + ", step " + std::to_string(ctx_.step) + ", " + phase_ + ": " +
                     util::current_exception_text());
  }
}

void NodeRun::start() {
  slot_.acquire();
  if (s_.resume) return restore();
  {
    // Every node starts from node 0's parameters and buffers.
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> state;
    for (auto& p : model_.network().parameters()) state.push_back(p.detach());
    for (auto& b : model_.network().buffers()) state.push_back(b.detach());
    runtime_comm_.broadcast(state, 0);
  }
  phase_ = "init of " + strategy_name_;
  strategy_.init(ctx_, model_);
}

// A resumed run: every node restores its own state, so no broadcast.
void NodeRun::restore() {
  phase_ = "restoring the checkpoint";
  ctx_.step = s_.first_step;
  auto node = s_.resume->nodes.find(rank_);
  EXOGYM_CHECK_INTERNAL(node != s_.resume->nodes.end(), "no checkpoint state loaded for this node");
  const std::string file = (s_.resume->folder / checkpoint::node_file_name(rank_)).string();
  checkpoint::restore_model(model_, node->second, file);
  phase_ = "init of " + strategy_name_;
  strategy_.init(ctx_, model_);
  phase_ = "restoring the state of " + strategy_name_ + " from " + file;
  meter_.restore(node->second.meter);  // first: load_state takes its collectives in flight back
  checkpoint::restore_strategy(strategy_, node->second);
  // Only this thread touches its node's entry.
  node->second = checkpoint::NodeState();
}

void NodeRun::change_membership(int64_t t) {
  ctx_.step = t;
  phase_ = "changing the membership before step " + std::to_string(t);
  cluster_.meet_all(rank_, &slot_, [this, t] {
    // The reporting node may change: what it reported from another process first.
    if (s_.role.mesh) exchange_reports(s_);
    membership_.advance(t, *s_.simulation, cluster_, s_.writer.get());
  });
  ctx_.membership_epoch = membership_.epoch();
  if (!membership_.recovering()) return;
  if (membership_.donor() == rank_) {
    phase_ = "sending the state of " + strategy_name_ + " to the nodes that come back";
    sdk::StateDict state;
    strategy_.recovery_state(model_, state);
    // A copy: this node trains on while the others take it.
    for (auto& [key, tensor] : state) tensor = tensor.detach().clone();
    membership_.deposit(std::move(state));
  }
  phase_ = "recovering the nodes that come back at step " + std::to_string(t);
  cluster_.meet_all(rank_, &slot_, [this, t] { membership_.deliver(t, *s_.simulation, s_.writer.get()); });
  if (membership_.returns(rank_)) {
    phase_ = "taking the state of " + strategy_name_ + " from node " + std::to_string(membership_.donor());
    const auto state = membership_.delivered();
    EXOGYM_CHECK_INTERNAL(state != nullptr, "no recovery state delivered");
    strategy_.load_recovery_state(model_, *state);
    membership_.loaded();
  }
}

void NodeRun::start_step(int64_t t) {
  ctx_.step = t;
  if (!s_.stop_point && host::interrupt_requested()) {
    throw host::Interrupted("interrupted by a signal (" + host::interrupt_signal_text() + ") after " +
                            std::to_string(t) + " steps");
  }
}

void NodeRun::meet_every_node(const std::function<void()>& work) {
  if (membership_.simulated()) return cluster_.meet_all(rank_, &slot_, work);
  if (work && rank_ == s_.role.block.first) work();
  backend_->barrier();
}

void NodeRun::boundary(int64_t step) {
  bool stop = false;
  if (s_.stop_point) {
    using Answer = checkpoint::StopPoint::Answer;
    Answer answer;
    while ((answer = s_.stop_point->at_boundary(rank_, step, host::interrupt_requested())) == Answer::Wait) {
      // This process's proposal: wait for the other processes' (stop_vote.h),
      // without holding a compute slot another node needs to get here.
      phase_ = "waiting for the processes to agree where to stop after the signal";
      slot_.release();
      const bool agreed = s_.stop_point->wait_for_agreement();
      slot_.acquire();
      if (!agreed) throw sdk::AbortedError("the run failed while its processes agreed where to stop");
    }
    stop = answer == Answer::Stop;
  }
  if (stop || checkpoint_due(s_, step)) write_checkpoint(step);
  if (stop) {
    throw host::Interrupted("interrupted by a signal (" + host::interrupt_signal_text() + ") after " +
                            std::to_string(step) + " steps; resume with exogym-run --resume " +
                            s_.checkpoints->folder().parent_path().string());
  }
}

// Collective: every node writes its file, they meet, (over several
// processes: the other processes hand their metric rows over, they meet,)
// node 0 commits, they meet again (so that a failed commit stops every node). The meetings are
// the runtime's, unmetered: a checkpoint changes no count and no clock.
void NodeRun::write_checkpoint(int64_t step) {
  phase_ = "writing the checkpoint of step " + std::to_string(step);
  const auto started = std::chrono::steady_clock::now();
  checkpoint::write_node_state(s_.checkpoints->partial_folder(step), rank_, step, model_, strategy_, meter_.state());
  meet_every_node();
  if (s_.role.mesh) {
    // Every node of this process is here: no metric row or report is still coming.
    meet_every_node([this, step] {
      if (s_.metric_buffer) hand_over_metrics(s_, step);
      if (membership_.simulated()) exchange_reports(s_);
    });
  }
  std::filesystem::path folder;
  if (rank_ == 0) folder = commit_checkpoint(s_, step);
  meet_every_node();
  if (rank_ != 0) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++s_.checkpoints_written;
  s_.checkpoint_seconds += seconds;
  s_.log->debug("checkpoint {} written in {:.3f} s", folder.string(), seconds);
}

void NodeRun::train_step(int64_t t) {
  start_step(t);
  meter_.set_completed_steps(t);
  if (eval_enabled(m_) && m_.eval_interval > 0 && t % m_.eval_interval == 0) {
    if (m_.stop_on_nonfinite && first_nonfinite(model_.network().parameters()) >= 0) {
      throw Diverged(rank_, t, "a parameter of the model");
    }
    phase_ = "evaluation";
    evaluate(s_, rank_, model_, runtime_comm_, t);
  }
  meter_.begin_step(t);
  phase_ = "zero_grad of " + strategy_name_;
  strategy_.zero_grad();
  phase_ = "loading the training batch";
  const double loss = forward_backward(s_.data.sampler->batch_indices(rank_, t));
  if (m_.stop_on_nonfinite && !std::isfinite(loss)) throw Diverged(rank_, t, "the training loss");
  phase_ = "step of " + strategy_name_;
  strategy_.step();
  release_gradients(model_.network());
  meter_.end_step();
  if (rank_ == membership_.reporter()) {
    report_step(t, loss);
  } else if (membership_.simulated()) {
    meter_.take_rows();  // the reporting node writes comm.csv
  }
}

double NodeRun::forward_backward(const std::vector<int64_t>& indices) {
  const int64_t b = m_.minibatch_size;
  double loss_sum = 0;
  for (int64_t j = 0; j < s_.accumulation; ++j) {
    std::vector<int64_t> micro(indices.begin() + j * b, indices.begin() + (j + 1) * b);
    phase_ = "loading the training batch";
    sdk::Batch batch = host::to_device(s_.data.train_of(rank_).get(micro), device_);
    phase_ = "forward/backward of " + model_name_;
    at::Tensor loss;
    {
      AutocastScope autocast(m_.precision, device_.type());
      loss = model_.loss(batch);
    }
    if (loss.numel() != 1)
      throw sdk::Error("loss() must return a scalar, got shape " + std::to_string(loss.dim()) + "-D");
    loss.backward();
    loss_sum += loss.item<double>();
  }
  if (s_.accumulation > 1) {
    // Per-node gradient = mean of the micro-batch mean gradients.
    at::NoGradGuard no_grad;
    for (auto& p : model_.network().parameters()) {
      if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(s_.accumulation));
    }
  }
  return loss_sum / static_cast<double>(s_.accumulation);
}

// The reporting node's rows of train.csv and comm.csv, and the progress
// line: node 0's, or with failures the lowest live node's.
void NodeRun::report_step(int64_t t, double loss) {
  if (!std::isfinite(loss) && std::isfinite(last_loss_)) {
    s_.log->warn("node {}: training loss became {} at step {}", rank_, loss, t);
  }
  last_loss_ = loss;
  report_train(s_, train_report(s_, meter_, t + 1, loss, strategy_.lr()), meter_.take_rows());
}

void NodeRun::finish() {
  meter_.land_transfers();  // after the last checkpoint, which keeps them in flight
  ctx_.step = m_.max_steps;
  meter_.set_completed_steps(m_.max_steps);
  if (eval_enabled(m_)) {
    phase_ = "final evaluation";
    evaluate(s_, rank_, model_, runtime_comm_, m_.max_steps);
  }
  phase_ = "averaging the final model";
  const NamedTensors state = float_state(model_.network());
  const std::vector<at::Tensor> averaged = average_in_place(state.tensors, runtime_comm_);
  if (rank_ != membership_.reporter()) return;
  if (m_.stop_on_nonfinite && first_nonfinite(averaged) >= 0) {
    throw Diverged(rank_, m_.max_steps, "a parameter of the averaged model");
  }
  report_comm(s_, meter_.take_rows());
  if (!m_.model_formats.empty()) {
    phase_ = "saving the model";
    report_final_model(s_, saved_model(state, averaged, model_.network()));
  }
}

}  // namespace

void run_nodes(TrainingState& s, const threads::ThreadPlan& plan, bool exact_reduce) {
  const manifest::Manifest& m = s.m;
  dist::ProcessMesh* mesh = s.role.mesh;
  auto cluster = mesh ? std::make_unique<train::Cluster>(m.nodes, plan.parallelism, *mesh, s.role.block,
                                                         &s.simulation->clocks(), exact_reduce)
                      : std::make_unique<train::Cluster>(m.nodes, plan.parallelism);
  if (plan.pinned) cluster->slots().pin_threads();
  std::unique_ptr<checkpoint::StopVote> vote;
  if (mesh && s.stop_point) {
    checkpoint::StopPoint* point = s.stop_point.get();
    cluster->abort_signal().on_abort([point] { point->abandon(); });
    vote = std::make_unique<checkpoint::StopVote>(*mesh, *point, cluster->abort_signal(), m.max_steps);
  }
  cluster->run([&](int rank, threads::NodeSlot& slot) {
    // OpenMP settings are per thread: a new thread would start with one
    // OpenMP thread per core, and K such teams oversubscribe the machine.
    at::set_num_threads(plan.threads);
    NodeRun(s, *cluster, rank, slot).run();
  });
  if (vote) vote->finished();
  // What a reporting node in another process left since the last meeting,
  // and the final model it saved.
  if (mesh && m.has_faults()) exchange_reports(s, s.membership->reporter());
}

}  // namespace exogym::runtime::train
