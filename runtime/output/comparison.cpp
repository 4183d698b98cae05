#include "exogym/runtime/output/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "exogym/runtime/manifest/units.h"

namespace exogym::runtime::output {

namespace {

std::vector<std::string> metric_union(const std::vector<train::RunResult>& results) {
  std::vector<std::string> names;
  for (const auto& r : results) {
    for (const auto& n : r.metric_names) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  return names;
}

std::string fixed(double v, int digits = 4) {
  if (std::isnan(v)) return "-";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

double metric(const EvalValues& values, const train::RunResult& r, const std::string& name) {
  for (size_t i = 0; i < r.metric_names.size(); ++i) {
    if (r.metric_names[i] == name && i < values.metrics.size()) return values.metrics[i];
  }
  return NAN;
}

std::vector<std::vector<std::string>> rows(const std::vector<train::RunResult>& results, bool pretty) {
  const auto metrics = metric_union(results);
  std::vector<std::string> header = {"variant", "strategy", "nodes", "steps"};
  const bool any_skew =
      std::any_of(results.begin(), results.end(), [](const train::RunResult& r) { return r.label_skew; });
  if (any_skew) header.push_back("label_skew");
  header.push_back("local_loss");
  header.push_back("global_loss");
  for (const auto& n : metrics) {
    header.push_back("local_" + n);
    header.push_back("global_" + n);
  }
  header.push_back("train_loss");
  header.push_back(pretty ? "sent/node" : "bytes_sent_per_node");
  header.push_back(pretty ? "sim_time" : "sim_time_s");
  const bool any_target =
      std::any_of(results.begin(), results.end(), [](const train::RunResult& r) { return r.target_loss; });
  if (any_target) {
    header.push_back("target_step");
    header.push_back(pretty ? "target_sim" : "target_sim_time_s");
  }
  header.push_back("wall_s");
  std::vector<std::vector<std::string>> table{header};
  for (const auto& r : results) {
    std::vector<std::string> row = {r.variant.empty() ? r.name : r.variant, r.strategy_plugin, std::to_string(r.nodes),
                                    std::to_string(r.steps)};
    if (any_skew) row.push_back(r.label_skew ? fixed(*r.label_skew, 3) : "-");
    const bool has = r.final_eval.has_value();
    row.push_back(has ? fixed(r.final_eval->local.loss) : "-");
    row.push_back(has ? fixed(r.final_eval->global.loss) : "-");
    for (const auto& n : metrics) {
      row.push_back(has ? fixed(metric(r.final_eval->local, r, n)) : "-");
      row.push_back(has ? fixed(metric(r.final_eval->global, r, n)) : "-");
    }
    row.push_back(fixed(r.last_train_loss));
    const auto& sim = r.simulated;
    row.push_back(pretty ? manifest::format_bytes(sim.bytes_sent_per_node) : fixed(sim.bytes_sent_per_node, 0));
    row.push_back(pretty ? manifest::format_duration(sim.time_s) : fixed(sim.time_s, 6));
    if (any_target) {
      const bool hit = r.target_hit.has_value();
      row.push_back(hit ? std::to_string(r.target_hit->step) : "-");
      row.push_back(
          hit ? (pretty ? manifest::format_duration(r.target_hit->sim_time_s) : fixed(r.target_hit->sim_time_s, 6))
              : "-");
    }
    row.push_back(fixed(r.wall_seconds, pretty ? 1 : 3));
    table.push_back(row);
  }
  return table;
}

}  // namespace

std::string comparison_table(const std::vector<train::RunResult>& results) {
  auto table = rows(results, true);
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::ostringstream out;
  for (size_t r = 0; r < table.size(); ++r) {
    for (size_t i = 0; i < table[r].size(); ++i) {
      const auto& cell = table[r][i];
      const bool left = i < 2;
      if (i) out << "  ";
      if (left) {
        out << cell << std::string(width[i] - cell.size(), ' ');
      } else {
        out << std::string(width[i] - cell.size(), ' ') << cell;
      }
    }
    out << '\n';
    if (r == 0) {
      size_t total = 0;
      for (auto w : width) total += w + 2;
      out << std::string(total - 2, '-') << '\n';
    }
  }
  return out.str();
}

std::string comparison_csv(const std::vector<train::RunResult>& results) {
  std::ostringstream out;
  for (const auto& row : rows(results, false)) {
    for (size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << (row[i] == "-" ? "" : row[i]);
    out << '\n';
  }
  return out.str();
}

}  // namespace exogym::runtime::output
