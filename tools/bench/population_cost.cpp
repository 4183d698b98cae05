// The "population" section (docs/performance.md#a-million-clients): FedAvg
// on the MNIST MLP, 100 nodes, against the same 100 nodes training 100 of a
// million clients each round (participation.clients), each node taking on
// a new client, its Dirichlet label shares and FedAvg's state every round;
// then the same two runs with SCAFFOLD, whose clients each keep a control
// variate between their rounds (the store of client states grows by 100
// variates a round). Each run in a fresh child process: its peak memory,
// and its loop's time per round after the first rounds (the warm-up).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/sections.h"
#include "bench/table.h"
#include "bench/workloads.h"
#include "exogym/runtime/util/units.h"

namespace exogym::bench {

using nlohmann::json;
using runtime::util::format_bytes;

json population_section(const BenchOptions& o) {
  const int nodes = o.quick ? 4 : 100;
  const int64_t clients = o.quick ? 1000 : 1000000, round = 10;
  const int64_t warm_rounds = o.quick ? 1 : 2, rounds = o.quick ? 3 : 8;
  std::cout << "A population: FedAvg (H = " << round << ", AdamW) and SCAFFOLD (SGD) on the MNIST MLP, " << nodes
            << " nodes, Dirichlet labels (alpha 0.1), batch 32; resident nodes against " << nodes << " of " << clients
            << " clients a round (the time of rounds " << warm_rounds + 1 << " to " << rounds << ")";
  if (o.repeat > 1) std::cout << " (the fastest of " << o.repeat << " runs)";
  std::cout << "\n\n";
  const ModelCase mlp = mlp_case(o);
  const json fedavg = {{"H", round}, {"optimizer", {{"name", "adamw"}, {"lr", 1e-3}}}};
  const json scaffold = {{"H", round}, {"optimizer", {{"name", "sgd"}, {"lr", 0.05}}}};
  json out = json::array();
  std::vector<std::vector<std::string>> table;
  double resident_round = 0;
  for (const std::string strategy : {"fedavg", "scaffold"}) {
    for (const bool population : {false, true}) {
      json spec = training_spec(mlp, nodes, rounds * round, 32, strategy, strategy == "fedavg" ? fedavg : scaffold);
      spec["kind"] = "simulator";
      spec["data"]["partition"] = {{"name", "dirichlet"}, {"alpha", 0.1}};
      // The mark is the last step of the warm rounds, their outer step: the
      // time after it holds whole rounds, each with its change of clients
      // (at the first step of a round; a mark there left one change out).
      spec["mark_step"] = warm_rounds * round - 1;
      if (population) spec["participation"] = {{"clients", clients}, {"per_round", nodes}};
      double best = 0, peak = 0;
      for (int i = 0; i < o.repeat; ++i) {
        const json run = measure(o, spec);
        const double per_round = run["after_mark_seconds"].get<double>() / static_cast<double>(rounds - warm_rounds);
        if (i == 0 || per_round < best) best = per_round;
        peak = std::max(peak, run["peak_rss"].get<double>());
      }
      if (!population) resident_round = best;
      const std::string name = strategy + ", " +
                               (population ? std::to_string(nodes) + " of " + std::to_string(clients) + " clients"
                                           : std::to_string(nodes) + " resident nodes");
      out.push_back({{"run", name},
                     {"strategy", strategy},
                     {"clients", population ? clients : nodes},
                     {"nodes", nodes},
                     {"round_seconds", best},
                     {"peak_rss_bytes", peak},
                     {"round_ratio", best / resident_round}});
      table.push_back({name, fmt(best, 3), fmt(best / resident_round, 3), format_bytes(peak)});
    }
  }
  print_table({"run", "round_s", "of resident", "peak_rss"}, table);
  return out;
}

}  // namespace exogym::bench
