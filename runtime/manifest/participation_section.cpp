// The manifest's "participation" (docs/simulation.md#partial-participation).
#include "exogym/runtime/manifest/participation_section.h"

#include <filesystem>
#include <memory>
#include <string>

#include "exogym/runtime/sim/fault_schedule.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::manifest {

using nlohmann::json;
using sdk::ConfigError;

sim::ParticipationSpec read_participation(const json& section, int nodes, const ComputeSpec& compute) {
  sim::ParticipationSpec spec;
  if (section.contains("clients")) spec.clients = section.at("clients").get<int>();
  if (section.contains("per_round")) spec.per_round = section.at("per_round").get<int>();
  if (section.contains("fraction")) spec.fraction = section.at("fraction").get<double>();
  if (section.contains("round")) spec.round = section.at("round").get<int64_t>();
  if (spec.per_round.has_value() == spec.fraction.has_value()) {
    throw ConfigError("participation", std::string(spec.per_round ? "gives both per_round and fraction"
                                                                  : "gives neither per_round nor fraction") +
                                           ": give one, such as {\"per_round\": 10} or {\"fraction\": 0.1}");
  }
  if (spec.clients && *spec.clients < nodes) {
    throw ConfigError("participation.clients", std::to_string(*spec.clients) + " clients, but the run has " +
                                                   std::to_string(nodes) +
                                                   " nodes; at least nodes (each node trains one drawn client at "
                                                   "a time)");
  }
  const bool population = spec.clients && *spec.clients > nodes;
  if (spec.per_round && *spec.per_round > nodes) {
    throw ConfigError("participation.per_round",
                      std::to_string(*spec.per_round) +
                          (population ? " clients drawn each round, but the run has " + std::to_string(nodes) +
                                            " nodes to train them; at most nodes"
                                      : " nodes drawn each round, but the run has " + std::to_string(nodes) +
                                            " nodes; at most nodes"));
  }
  if (population && spec.fraction && sim::participants(spec, *spec.clients) > nodes) {
    throw ConfigError("participation.fraction", sdk::json_excerpt(section.at("fraction")) + " of " +
                                                    std::to_string(*spec.clients) + " clients is " +
                                                    std::to_string(sim::participants(spec, *spec.clients)) +
                                                    " each round, but the run has " + std::to_string(nodes) +
                                                    " nodes to train them; at most nodes");
  }
  if (section.contains("trace")) {
    const std::filesystem::path file = section.at("trace").get<std::string>();
    if (!compute.step_time) {
      throw ConfigError("participation.trace",
                        "a trace is read on the simulated clock, which needs a fixed compute.step_time (such as "
                        "\"50ms\"): with measured compute the clock, and so who is drawn, would change from run to "
                        "run");
    }
    spec.trace = std::make_shared<const sim::AvailabilityTrace>(
        sim::AvailabilityTrace::read(file, spec.clients.value_or(nodes), "participation.trace"));
  }
  return spec;
}

void check_population(const json& top, const Manifest& m) {
  const std::string population = std::to_string(*m.participation->clients) + " clients";
  if (m.has_faults()) {
    throw ConfigError(top.contains("faults") ? "faults" : "churn",
                      "does not combine with a population (participation.clients: " + population +
                          "): a client that fails is modelled by its availability in participation.trace");
  }
  if (top.at("compute").contains("speed")) {
    throw ConfigError("compute.speed", "lists nodes, but with participation.clients (" + population +
                                           ") the nodes train different clients each round: give the clients' "
                                           "speeds in participation.trace or compute.speed_distribution");
  }
  if (top.at("network").contains("nodes")) {
    throw ConfigError("network.nodes", "lists nodes, but with participation.clients (" + population +
                                           ") the nodes train different clients each round: give the clients' "
                                           "bandwidths in participation.trace or network.bandwidth_distribution");
  }
  const data::PartitionSpec& partition = m.train_data.partition;
  if (partition.kind != data::PartitionSpec::Kind::Iid && partition.kind != data::PartitionSpec::Kind::Dirichlet) {
    throw ConfigError(partition.json_path, std::string("\"") + partition.name() + "\" cannot share the data among " +
                                               population + ": use \"iid\" or \"dirichlet\"");
  }
}

void check_trace_start(const Manifest& m, const std::string& file) {
  const sim::AvailabilityTrace& trace = *m.participation->trace;
  std::vector<int> alive;
  if (m.has_population()) {
    for (int client = 0; client < trace.clients(); ++client) alive.push_back(client);
  } else {
    alive = sim::FaultSchedule(m.failure_spec()).live_at(0);
  }
  if (!trace.available(alive, 0).empty()) return;
  const std::string among = m.has_population() ? std::to_string(alive.size()) + " clients"
                                               : std::to_string(alive.size()) + " nodes alive at step 0";
  throw ConfigError("participation.trace", file + ": no client is available at time 0, when the " +
                                               "first round starts (among the " + among +
                                               "): a round needs at least one");
}

}  // namespace exogym::runtime::manifest
