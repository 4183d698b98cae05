#include "exogym/runtime/train/summary.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "exogym/runtime/data/node_data.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/train/training_state.h"

namespace exogym::runtime::train {

using nlohmann::json;

namespace {

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// DDP on the same cluster, the yardstick of communication-efficient
// strategies: a ring all-reduce of every gradient every step.
struct DdpEstimate {
  double bytes_sent_per_node = 0;
  double communication_s = 0;
};

DdpEstimate ddp_estimate(const RunContext& run, const TrainingSetup& setup, const Meters& simulation) {
  double gradient_bytes = 0;
  for (const auto& p : setup.replicas.models[run.role.block.first]->network().parameters()) {
    if (p.requires_grad()) gradient_bytes += static_cast<double>(p.numel()) * static_cast<double>(p.element_size());
  }
  const double steps = static_cast<double>(run.m.max_steps);
  return {steps * sim::all_reduce_traffic(gradient_bytes, run.m.nodes).sent,
          steps * simulation.network().all_reduce_time(gradient_bytes)};
}

SimulationSummary summarize_simulation(int nodes, const NodeAccounts& accounts, const DdpEstimate& ddp) {
  const json& per_node = accounts.per_node;
  const int K = nodes;
  SimulationSummary sim;
  for (const auto& node : per_node) {
    sim.time_s = std::max(sim.time_s, node.at("time_s").get<double>());
    sim.compute_s += node.at("compute_s").get<double>() / K;
    sim.communication_s += node.at("communication_s").get<double>() / K;
    sim.waiting_s += node.at("waiting_s").get<double>() / K;
    sim.hidden_s += node.at("hidden_s").get<double>() / K;
  }
  // Collectives over subgroups: each node's own bytes, not the reporting
  // node's extrapolation.
  double group_sent = 0;
  for (const auto& node : per_node) group_sent += node.value("group_bytes_sent", 0.0);
  sim.bytes_sent_total = accounts.reporter.cluster_sent - accounts.reporter.group_view_sent + group_sent;
  sim.bytes_sent_per_node = sim.bytes_sent_total / K;
  sim.runtime_bytes_sent_total = accounts.reporter.runtime_cluster_sent;
  sim.ddp_bytes_sent_per_node = ddp.bytes_sent_per_node;
  return sim;
}

json ratio(double a, double b) { return b > 0 ? json(a / b) : json(nullptr); }

json eval_json(const EvalRecord& r, const std::vector<std::string>& names) {
  json j = {{"step", r.step},
            {"local_loss", r.local.loss},
            {"global_loss", r.global.loss},
            {"local_perplexity", std::exp(r.local.loss)},
            {"global_perplexity", std::exp(r.global.loss)},
            {"bytes_sent", r.bytes_sent},
            {"sim_time_s", r.sim_time_s}};
  for (size_t i = 0; i < names.size(); ++i) {
    j["local_" + names[i]] = r.local.metrics[i];
    j["global_" + names[i]] = r.global.metrics[i];
  }
  return j;
}

// The run, its size and where the wall time went (this process: process 0
// in a run over several processes).
json run_json(const sdk::Dataset& train, const TrainingResult& r) {
  json j = {{"name", r.name},
            {"variant", r.variant},
            {"run_dir", r.run_dir.string()},
            {"model", {{"plugin", r.model_plugin}, {"parameters", r.parameters}}},
            {"strategy", r.strategy_plugin},
            {"nodes", r.nodes},
            {"steps", r.steps},
            {"examples_trained", r.examples_trained},
            {"last_train_loss", r.last_train_loss},
            {"wall_seconds", r.wall_seconds},
            {"steps_per_second", r.wall_seconds > 0 ? r.steps / r.wall_seconds : 0.0},
            {"timing",
             {{"datasets_s", r.dataset_seconds},
              {"startup_s", r.startup_seconds - r.dataset_seconds},
              {"loop_s", r.loop_seconds},
              {"finish_s", r.wall_seconds - r.startup_seconds - r.loop_seconds}}}};
  if (const int64_t tokens = train.tokens_per_example(); tokens > 0) {
    j["tokens_trained"] = r.examples_trained * tokens;
    j["tokens_per_second"] = r.wall_seconds > 0 ? r.examples_trained * tokens / r.wall_seconds : 0.0;
  }
  return j;
}

json communication_json(const SimulationSummary& sim, const NodeAccounts& accounts, int64_t steps) {
  const json& per_node = accounts.per_node;
  // The most any node sent in one step: the bandwidth a link needs at the
  // peak, which streaming strategies lower at equal total bytes.
  double peak = 0;
  for (const auto& node : per_node) peak = std::max(peak, node.at("peak_step_bytes_sent").get<double>());
  return {{"bytes_sent_per_node", sim.bytes_sent_per_node},
          {"bytes_sent_total", sim.bytes_sent_total},
          {"peak_bytes_sent_per_step", peak},
          {"mean_bytes_sent_per_step", steps > 0 ? sim.bytes_sent_per_node / static_cast<double>(steps) : 0.0},
          {"collectives_per_node", accounts.reporter.collectives},
          {"runtime_bytes_sent_total", sim.runtime_bytes_sent_total},
          {"ddp_bytes_sent_per_node", sim.ddp_bytes_sent_per_node},
          {"ratio_to_ddp", ratio(sim.bytes_sent_per_node, sim.ddp_bytes_sent_per_node)},
          {"per_node", per_node}};
}

json simulated_json(const manifest::Manifest& m, const Meters& simulation, const SimulationSummary& sim,
                    const DdpEstimate& ddp) {
  const sim::Link& bottleneck = simulation.network().bottleneck();
  const double ddp_time_s = sim.compute_s + ddp.communication_s;
  return {{"time_s", sim.time_s},
          {"compute_s", sim.compute_s},
          {"communication_s", sim.communication_s},
          {"waiting_s", sim.waiting_s},
          {"hidden_s", sim.hidden_s},
          {"compute", m.compute.step_time ? "fixed" : "measured"},
          {"network", m.resolved["network"]},
          {"bottleneck_link", {{"bandwidth_bytes_per_s", bottleneck.bandwidth}, {"latency_s", bottleneck.latency}}},
          {"ddp_estimate_time_s", ddp_time_s},
          {"ratio_to_ddp_estimate", ratio(sim.time_s, ddp_time_s)}};
}

json target_json(double target_loss, const std::optional<TargetHit>& hit) {
  json target = {{"loss", target_loss}, {"reached", hit.has_value()}};
  if (hit) {
    target["step"] = hit->step;
    target["sim_time_s"] = hit->sim_time_s;
    target["bytes_sent_per_node"] = hit->bytes_sent;
    target["wall_seconds"] = hit->wall_seconds;
  }
  return target;
}

}  // namespace

NodeAccounts gather_accounts(const Meters& simulation, const Membership& membership, const MetricBuffer* remote_metrics,
                             dist::ProcessMesh* mesh) {
  NodeAccounts accounts;
  const json mine = simulation.node_stats();
  // The cluster's totals as the reporting node saw them: a node alive at
  // the end has seen every collective (one that came back took its donor's
  // view).
  const int reporter = membership.reporter();
  json totals = nullptr;
  if (simulation.hosts(reporter)) {
    const sim::NodeMeter& meter = simulation.meter(reporter);
    totals = {meter.cluster_sent(sim::TrafficSource::Strategy), meter.cluster_sent(sim::TrafficSource::Runtime),
              meter.collectives(sim::TrafficSource::Strategy), meter.group_view_sent()};
  }
  accounts.per_node = accounts.remote_metrics = json::array();
  const json local = {
      {"nodes", mine}, {"metrics", remote_metrics ? remote_metrics->rows() : json::array()}, {"reporter", totals}};
  std::vector<json> parts = {local};
  if (mesh) {
    parts.clear();
    for (const auto& text : mesh->all_gather_text(local.dump())) parts.push_back(json::parse(text));
  }
  for (const json& part : parts) {
    for (const auto& n : part.at("nodes")) accounts.per_node.push_back(n);
    for (const auto& row : part.at("metrics")) accounts.remote_metrics.push_back(row);
    if (const json& r = part.at("reporter"); !r.is_null()) {
      accounts.reporter = {r.at(0).get<double>(), r.at(1).get<double>(), r.at(3).get<double>(), r.at(2).get<int64_t>()};
    }
  }
  return accounts;
}

TrainingResult run_result(const TrainingState& s) {
  const manifest::Manifest& m = s.run.m;
  const TrainingSetup& setup = s.setup;
  TrainingResult r;
  r.name = m.name;
  r.variant = m.variant;
  r.run_dir = s.outputs.run_dir;
  r.model_plugin = m.model.plugin;
  r.strategy_plugin = m.strategy.plugin;
  r.metric_names = setup.metric_names;
  r.nodes = m.nodes;
  r.steps = m.max_steps;
  r.examples_trained = m.max_steps * m.batch_size * m.nodes;
  if (s.membership && s.membership->simulated()) {
    if (m.has_faults()) r.faults = s.membership->totals(m.max_steps);
    if (m.participation) r.participation = s.membership->participation_totals(m.max_steps);
    r.examples_trained = s.membership->examples_trained(m.max_steps, m.batch_size);
  }
  // Asynchronous nodes compute only in the slots their speed allows.
  if (s.simulation && s.simulation->async().running())
    r.examples_trained = s.simulation->async().steps_computed() * m.batch_size;
  r.parameters = setup.parameters;
  r.last_train_loss = s.reported.last_train_loss;
  r.wall_seconds = seconds_between(s.run.started, std::chrono::steady_clock::now());
  r.dataset_seconds = setup.data.seconds;
  if (s.loop.started()) {  // this process's nodes
    r.startup_seconds = seconds_between(s.run.started, s.loop.start());
    r.loop_seconds = seconds_between(s.loop.start(), s.loop.end());
    if (s.loop.marked()) r.after_mark_seconds = seconds_between(s.loop.mark(), s.loop.end());
    r.checkpoints = s.checkpoints.written;
    r.checkpoint_seconds = s.checkpoints.seconds;
    r.checkpoint_bytes = s.checkpoints.bytes;
  }
  r.final_eval = s.reported.last_eval;
  r.label_skew = data::label_skew(setup.data.node_data);
  r.target_loss = m.target_loss;
  r.target_hit = s.reported.target_hit;
  return r;
}

void write_summary(const RunContext& run, const TrainingSetup& setup, const Meters& simulation,
                   const Membership& membership, output::RunWriter& writer, TrainingResult& r,
                   const NodeAccounts& accounts) {
  const manifest::Manifest& m = run.m;
  replay_metrics(accounts.remote_metrics, writer);
  const DdpEstimate ddp = ddp_estimate(run, setup, simulation);
  r.simulated = summarize_simulation(m.nodes, accounts, ddp);
  json summary = run_json(*setup.data.train, r);
  summary["final"] = r.final_eval ? eval_json(*r.final_eval, r.metric_names) : json(nullptr);
  summary["communication"] = communication_json(r.simulated, accounts, m.max_steps);
  summary["simulated"] = simulated_json(m, simulation, r.simulated, ddp);
  if (r.target_loss) summary["target"] = target_json(*r.target_loss, r.target_hit);
  summary["data"] = {{"partition", m.resolved["data"]["train"]["partition"]},
                     {"label_skew", r.label_skew ? json(*r.label_skew) : json(nullptr)}};
  const ExecutionChoice execution = setup.stacks->choice();
  summary["execution"] = {{"mode", execution.stacked ? "stacked" : "per_node"}, {"stacks", execution.stacks}};
  if (!execution.stacked) summary["execution"]["reason"] = execution.reason;
  if (execution.stacked) {
    // The node-steps whose local step (optimizer and clipping) was one over the stacks.
    summary["execution"]["part_sizes"] = execution.part_sizes;
    if (!execution.parts_because.empty()) summary["execution"]["parts_because"] = execution.parts_because;
    summary["execution"]["local_steps"] = {{"together", execution.steps_together},
                                           {"after_backward", execution.steps_after_backward},
                                           {"apart", execution.steps_apart}};
    if (execution.steps_apart > 0) summary["execution"]["local_steps"]["apart_because"] = execution.apart_because;
  }
  if (r.faults) {
    summary["faults"] = {{"failures", r.faults->failures},
                         {"rejoins", r.faults->rejoins},
                         {"late_joins", r.faults->late_joins},
                         {"node_steps_lost", r.faults->node_steps_lost},
                         {"recovery_bytes", r.faults->recovery_bytes},
                         {"recovery_time_s", r.faults->recovery_time_s},
                         {"live_nodes_at_end", membership.live().size()}};
  }
  if (r.participation) {
    const ParticipationTotals& p = *r.participation;
    summary["participation"] = {{"round_steps", p.round_steps},
                                {"node_steps_sat_out", p.node_steps_sat_out},
                                {"returns", p.returns},
                                {"transfer_bytes", p.transfer_bytes},
                                {"transfer_time_s", p.transfer_time_s},
                                {"clients_with_state", p.clients_with_state},
                                {"client_state_bytes", p.client_state_bytes}};
  }
  if (r.stopped) summary["stopped"] = {{"reason", "nonfinite"}, {"message", *r.stopped}};
  writer.write_summary(summary);
}

}  // namespace exogym::runtime::train
