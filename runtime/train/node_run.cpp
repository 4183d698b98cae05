#include "exogym/runtime/train/node_run.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "exogym/runtime/async/async_checkpoint.h"
#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/runtime/host/devices.h"
#include "exogym/runtime/host/interrupt.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/train/autocast_scope.h"
#include "exogym/runtime/train/checkpointing.h"
#include "exogym/runtime/train/divergence.h"
#include "exogym/runtime/train/evaluation.h"
#include "exogym/runtime/train/model_state.h"
#include "exogym/runtime/train/reports.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/metric_sink.h"

namespace exogym::runtime::train {

namespace {

std::string plugin_name(const char* kind, const std::string& name, const plugin::LoadedPlugin& plugin) {
  return std::string(kind) + " \"" + name + "\" (" + plugin.description().file.string() + ")";
}

}  // namespace

NodeRun::NodeRun(TrainingState& s, train::Cluster& cluster, int rank, threads::NodeSlot& slot)
    : s_(s),
      m_(s.run.m),
      cluster_(cluster),
      membership_(*s.membership),
      rank_(rank),
      slot_(slot),
      model_(*s.setup.replicas.models[rank]),
      strategy_(*s.setup.replicas.strategies[rank]),
      backend_(cluster.communicator(rank, &slot)),
      meter_(s.simulation->meter(rank)),
      strategy_comm_(*backend_, meter_, sim::TrafficSource::Strategy,
                     membership_.simulated() ? &membership_.live() : nullptr),
      runtime_comm_(*backend_, meter_, sim::TrafficSource::Runtime,
                    membership_.simulated() ? &membership_.live() : nullptr),
      device_(host::device_for_node(s.setup.devices, rank)),
      shared_(s.setup.shared),
      strategy_name_(plugin_name("strategy", m_.strategy.plugin, *s.setup.plugins.strategy)),
      model_name_(plugin_name("model", m_.model.plugin, *s.setup.plugins.model)) {
  ctx_.rank = rank;
  ctx_.num_nodes = m_.nodes;
  ctx_.live = &membership_.live();
  ctx_.live_counts = &membership_.live_counts();
  ctx_.membership_epoch = membership_.epoch();
  ctx_.device = device_;
  ctx_.comm = &strategy_comm_;
  ctx_.step = 0;
  ctx_.max_steps = m_.max_steps;
  ctx_.seed = m_.seed;
  ctx_.log = s.run.log;
  ctx_.metrics = s.outputs.metric_sink();
  ctx_.shared = &shared_;
  ctx_.async = &s.simulation->async().link(rank);
  ctx_.client = membership_.client_of(rank);
  ctx_.clients = m_.has_population() ? *m_.participation->clients : m_.nodes;
  client_state_ = membership_.client_store() && strategy_.has_client_state() ? &strategy_ : nullptr;
  std::vector<sim::AdversarySpec> mine;
  for (const auto& a : m_.adversaries) {
    if (a.node == rank) mine.push_back(a);
  }
  if (!mine.empty()) {
    adversary_comm_ =
        std::make_unique<sim::AdversarialCommunicator>(strategy_comm_, std::move(mine), m_.seed, &ctx_.step);
    ctx_.comm = adversary_comm_.get();
  }
}

void NodeRun::run() {
  try {
    start();
    asynchronous_ = s_.simulation->async().connected(rank_);
    // Before the node counts as started: "stacked" refused here leaves no folder.
    phase_ = "choosing how the nodes compute";
    stacked_ = s_.setup.stacks->start_node(rank_, asynchronous_);
    if (stacked_) {
      stacked_steps_ = std::make_unique<StackedStepsOfNode>(*s_.setup.stacks, ctx_, &slot_, meter_);
      ctx_.stack = stacked_steps_.get();
    }
    if (rank_ == s_.run.role.block.first) s_.setup.stacks->report(*s_.outputs.progress, *s_.run.log);
    s_.nodes_started.fetch_add(1);
    s_.loop.note_start();
    if (asynchronous_) {
      phase_ = "checking that the run can be asynchronous";
      s_.simulation->async().check_runnable();
      if (m_.has_population() && strategy_.has_client_state()) {
        throw sdk::ConfigError("participation.clients",
                               strategy_name_ +
                                   " keeps state of its clients, which an asynchronous run over a population does "
                                   "not carry from node to node");
      }
    }
    for (int64_t t = s_.checkpoints.first_step; t < m_.max_steps; ++t) {
      if (membership_.meets_before(t)) change_membership(t);
      if (asynchronous_)
        async_slot(t);
      else if (membership_.is_live(rank_))
        train_step(t);
      else
        start_step(t);
      if (t == s_.loop.mark_step) s_.loop.note_mark();
      boundary(t + 1);
    }
    if (asynchronous_) {
      phase_ = "the last updates of " + strategy_name_ + " and their replies";
      cluster_.meet_all(rank_, &slot_, [this] {
        s_.simulation->async().drain(m_.max_steps, s_.simulation->meter_of(), ctx_.metrics);
      });
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
  if (s_.checkpoints.resume) return restore();
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
  ctx_.step = s_.checkpoints.first_step;
  checkpoint::LoadedCheckpoint& resume = *s_.checkpoints.resume;
  auto node = resume.nodes.find(rank_);
  EXOGYM_CHECK_INTERNAL(node != resume.nodes.end(), "no checkpoint state loaded for this node");
  const std::string file = (resume.folder / checkpoint::node_file_name(rank_)).string();
  checkpoint::restore_model(model_, node->second, file);
  phase_ = "init of " + strategy_name_;
  strategy_.init(ctx_, model_);
  phase_ = "restoring the state of " + strategy_name_ + " from " + file;
  meter_.restore(node->second.meter);  // first: load_state takes its collectives in flight back
  checkpoint::restore_strategy(strategy_, node->second);
  async::restore_async_state(s_.simulation->async(), rank_, rank_ == s_.run.role.block.first, node->second.async, file,
                             resume.folder, s_.checkpoints.first_step);
  // Only this thread touches its node's entry.
  node->second = checkpoint::NodeState();
}

void NodeRun::start_step(int64_t t) {
  ctx_.step = t;
  ctx_.speed = s_.simulation->speed(rank_);
  ctx_.fastest_speed = s_.simulation->fastest_speed(membership_.live());
  if (!s_.checkpoints.stop_point && host::interrupt_requested()) {
    throw host::Interrupted("interrupted by a signal (" + host::interrupt_signal_text() + ") after " +
                            std::to_string(t) + " steps");
  }
}

void NodeRun::meet_every_node(const std::function<void()>& work) {
  if (membership_.simulated()) return cluster_.meet_all(rank_, &slot_, work);
  if (work && rank_ == s_.run.role.block.first) work();
  backend_->barrier();
}

void NodeRun::train_step(int64_t t) {
  start_step(t);
  evaluate_at(t);
  report_or_drop(t, compute_step(t));
}

void NodeRun::evaluate_at(int64_t t) {
  meter_.set_completed_steps(t);
  if (eval_enabled(m_) && m_.eval_interval > 0 && t % m_.eval_interval == 0) {
    if (m_.stop_on_nonfinite && first_nonfinite(model_.network().parameters()) >= 0) {
      throw Diverged(rank_, t, "a parameter of the model");
    }
    phase_ = "evaluation";
    if (auto r = evaluate(m_, s_.setup, membership_.live(), meter_, rank_, model_, runtime_comm_, t))
      report_evaluation(s_.run, s_.outputs, s_.reported, *r);
  }
}

void NodeRun::async_slot(int64_t t) {
  start_step(t);
  // Sitting the slot out, a node reports its last loss; down, it does nothing.
  double loss = last_loss_;
  if (membership_.is_live(rank_)) {
    phase_ = "the server's reply to " + strategy_name_;
    const bool computes = s_.simulation->async().begin_slot(rank_, t, meter_);
    // Every live node evaluates (a collective of the runtime's), computing or not.
    evaluate_at(t);
    if (computes) {
      loss = compute_step(t);
    } else {
      meter_.set_completed_steps(t + 1);
    }
  }
  phase_ = "waiting for the other nodes between slots of " + strategy_name_;
  cluster_.meet_all(rank_, &slot_,
                    [this, t] { s_.simulation->async().between_slots(t, s_.simulation->meter_of(), ctx_.metrics); });
  // Over a population, a reply to the node's update in the meeting went to
  // its next client: it says which at the step the update's arrival is
  // recorded at (before the checkpoint after this slot, which keeps it).
  if (s_.setup.data.client_slots && membership_.client_of(rank_) != ctx_.client) {
    ctx_.client = membership_.client_of(rank_);
    if (ctx_.metrics) ctx_.metrics->record(rank_, t + 1, "client", ctx_.client);
  }
  // After the meeting: the updates that left in it are this step's comm.csv rows.
  report_or_drop(t, loss);
}

double NodeRun::compute_step(int64_t t) {
  phase_ = "computes() of " + strategy_name_;
  const bool computes = strategy_.computes();
  meter_.begin_step(t, computes);
  // An idle step reports the node's last loss.
  double loss = last_loss_;
  if (computes) {
    phase_ = "zero_grad of " + strategy_name_;
    strategy_.zero_grad();
    phase_ = "loading the training batch";
    // An asynchronous node takes its batches in order, skipping none when it
    // sits slots out (begin_slot counted this step).
    const int64_t batch = asynchronous_ ? s_.simulation->async().steps_computed(rank_) - 1 : t;
    loss = forward_backward(s_.setup.data.sampler->batch_indices(rank_, batch));
    if (m_.stop_on_nonfinite && !std::isfinite(loss)) throw Diverged(rank_, t, "the training loss");
  } else if (stacked_) {
    // Its stack still meets it, computing without it, and for the local
    // steps, which it takes none of: now, before its step() communicates
    // while the others wait there.
    phase_ = "forward/backward of " + model_name_ + ", stacked, without this node";
    s_.setup.stacks->forward_backward(rank_, {}, &slot_, meter_);
    s_.setup.stacks->end_step(rank_, t, &slot_, meter_);
  }
  phase_ = "step of " + strategy_name_;
  strategy_.step();
  if (stacked_) s_.setup.stacks->end_step(rank_, t, &slot_, meter_);
  release_gradients(model_.network());
  meter_.end_step();
  return loss;
}

void NodeRun::report_or_drop(int64_t t, double loss) {
  if (rank_ == membership_.reporter()) {
    report_step(t, loss);
  } else if (membership_.simulated()) {
    meter_.take_rows();  // the reporting node writes comm.csv
  }
}

double NodeRun::forward_backward(const std::vector<int64_t>& indices) {
  const int64_t b = m_.minibatch_size;
  const int64_t accumulation = s_.setup.accumulation;
  double loss_sum = 0;
  std::vector<sdk::Batch> stacked_batches;
  for (int64_t j = 0; j < accumulation; ++j) {
    std::vector<int64_t> micro(indices.begin() + j * b, indices.begin() + (j + 1) * b);
    phase_ = "loading the training batch";
    sdk::Batch batch = host::to_device(s_.setup.data.train_of(rank_).get(micro), device_);
    if (stacked_) {
      stacked_batches.push_back(std::move(batch));
      continue;
    }
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
  if (stacked_) {
    phase_ = "forward/backward of " + model_name_ + ", stacked";
    loss_sum = s_.setup.stacks->forward_backward(rank_, stacked_batches, &slot_, meter_);
  }
  // A stack averages its nodes' own, before it may step (stack_compute.cpp).
  if (!stacked_) average_micro_batch_gradients(model_.network().parameters(), accumulation);
  return loss_sum / static_cast<double>(accumulation);
}

// The reporting node's rows of train.csv and comm.csv, and the progress
// line: node 0's, or with failures the lowest live node's.
void NodeRun::report_step(int64_t t, double loss) {
  if (!std::isfinite(loss) && std::isfinite(last_loss_)) {
    s_.run.log->warn("node {}: training loss became {} at step {}", rank_, loss, t);
  }
  last_loss_ = loss;
  TrainReport row = train_report(m_, membership_, meter_, t + 1, loss, strategy_.lr());
  if (asynchronous_) row.examples = s_.simulation->async().steps_computed() * m_.batch_size;
  report_train(s_.outputs, s_.reported, row, meter_.take_rows());
}

void NodeRun::finish() {
  // The last checkpoint is written: what the strategy still has in flight
  // lands now, and the run ends when it has.
  meter_.land_transfers();
  ctx_.step = m_.max_steps;
  meter_.set_completed_steps(m_.max_steps);
  if (eval_enabled(m_)) {
    phase_ = "final evaluation";
    if (auto r = evaluate(m_, s_.setup, membership_.live(), meter_, rank_, model_, runtime_comm_, m_.max_steps))
      report_evaluation(s_.run, s_.outputs, s_.reported, *r);
  }
  phase_ = "averaging the final model";
  const FloatState state = float_state(model_.network());
  const std::vector<at::Tensor> averaged = average_in_place(state.tensors, runtime_comm_);
  if (rank_ != membership_.reporter()) return;
  if (m_.stop_on_nonfinite && first_nonfinite(averaged) >= 0) {
    throw Diverged(rank_, m_.max_steps, "a parameter of the averaged model");
  }
  report_comm(s_.outputs, meter_.take_rows());
  if (!m_.model_formats.empty()) {
    phase_ = "saving the model";
    report_final_model(s_.outputs, m_.model_formats, saved_model(state, averaged, model_.network()));
  }
}

}  // namespace exogym::runtime::train
