#include "exogym/runtime/command/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>

#include "exogym/runtime/util/mean_std.h"
#include "exogym/runtime/util/units.h"

namespace exogym::runtime::command {

namespace {

using Run = train::TrainingResult;
using VariantRuns = std::vector<const Run*>;  // one variant's runs, one per seed

std::vector<std::string> metric_union(const std::vector<Run>& results) {
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

std::optional<double> metric(const output::EvalValues& values, const Run& r, const std::string& name) {
  for (size_t i = 0; i < r.metric_names.size(); ++i) {
    if (r.metric_names[i] == name && i < values.metrics.size()) return values.metrics[i];
  }
  return NAN;
}

// The runs of one variant follow one another (manifest/seeds.h).
std::vector<VariantRuns> group_by_variant(const std::vector<Run>& results) {
  std::vector<VariantRuns> groups;
  for (const auto& r : results) {
    if (groups.empty() || groups.back().front()->variant != r.variant || groups.back().front()->name != r.name) {
      groups.emplace_back();
    }
    groups.back().push_back(&r);
  }
  return groups;
}

// A number column: its value for one run (none: the run has no such value)
// and how a value reads in the text table (pretty) or the CSV file.
struct Column {
  std::string pretty_header, csv_header;
  std::function<std::optional<double>(const Run&)> value;
  std::function<std::string(double, bool pretty)> format;
};

std::function<std::string(double, bool)> digits(int pretty_digits, int csv_digits) {
  return [=](double v, bool pretty) { return fixed(v, pretty ? pretty_digits : csv_digits); };
}

std::string duration(double v, bool pretty) { return pretty ? util::format_duration(v) : fixed(v, 6); }

std::vector<Column> number_columns(const std::vector<Run>& results) {
  std::vector<Column> columns;
  const auto any = [&](auto has) { return std::any_of(results.begin(), results.end(), has); };
  const auto final_eval = [](auto get) {
    return [get](const Run& r) -> std::optional<double> {
      if (!r.final_eval) return std::nullopt;
      return get(r, *r.final_eval);
    };
  };
  if (any([](const Run& r) { return r.label_skew.has_value(); })) {
    columns.push_back({"label_skew", "label_skew", [](const Run& r) { return r.label_skew; }, digits(3, 3)});
  }
  columns.push_back({"local_loss", "local_loss", final_eval([](const Run&, const train::EvalRecord& e) {
                       return std::optional<double>(e.local.loss);
                     }),
                     digits(4, 4)});
  columns.push_back({"global_loss", "global_loss", final_eval([](const Run&, const train::EvalRecord& e) {
                       return std::optional<double>(e.global.loss);
                     }),
                     digits(4, 4)});
  for (const auto& n : metric_union(results)) {
    columns.push_back({"local_" + n, "local_" + n,
                       final_eval([n](const Run& r, const train::EvalRecord& e) { return metric(e.local, r, n); }),
                       digits(4, 4)});
    columns.push_back({"global_" + n, "global_" + n,
                       final_eval([n](const Run& r, const train::EvalRecord& e) { return metric(e.global, r, n); }),
                       digits(4, 4)});
  }
  columns.push_back({"train_loss", "train_loss", [](const Run& r) { return r.last_train_loss; }, digits(4, 4)});
  columns.push_back({"sent/node", "bytes_sent_per_node", [](const Run& r) { return r.simulated.bytes_sent_per_node; },
                     [](double v, bool pretty) { return pretty ? util::format_bytes(v) : fixed(v, 0); }});
  columns.push_back({"sim_time", "sim_time_s", [](const Run& r) { return r.simulated.time_s; }, duration});
  if (any([](const Run& r) { return r.faults.has_value(); })) {
    // Runs without failures lost nothing: 0, not "-".
    const auto fault = [](auto get) {
      return [get](const Run& r) -> std::optional<double> {
        return r.faults ? std::optional<double>(get(*r.faults)) : std::optional<double>(0.0);
      };
    };
    columns.push_back(
        {"failures", "failures", fault([](const train::FaultTotals& f) { return double(f.failures); }), digits(0, 0)});
    columns.push_back({"lost_steps", "node_steps_lost",
                       fault([](const train::FaultTotals& f) { return double(f.node_steps_lost); }), digits(0, 0)});
    columns.push_back({"recovery", "recovery_bytes",
                       fault([](const train::FaultTotals& f) { return f.recovery_bytes; }),
                       [](double v, bool pretty) { return pretty ? util::format_bytes(v) : fixed(v, 0); }});
  }
  if (any([](const Run& r) { return r.participation.has_value(); })) {
    // Runs where every node takes part sat nothing out: 0, not "-".
    const auto drawn = [](auto get) {
      return [get](const Run& r) -> std::optional<double> {
        return r.participation ? std::optional<double>(get(*r.participation)) : std::optional<double>(0.0);
      };
    };
    columns.push_back({"sat_out", "node_steps_sat_out",
                       drawn([](const train::ParticipationTotals& p) { return double(p.node_steps_sat_out); }),
                       digits(0, 0)});
    columns.push_back({"state_sent", "participation_transfer_bytes",
                       drawn([](const train::ParticipationTotals& p) { return p.transfer_bytes; }),
                       [](double v, bool pretty) { return pretty ? util::format_bytes(v) : fixed(v, 0); }});
  }
  if (any([](const Run& r) { return r.target_loss.has_value(); })) {
    const auto step = [](const Run& r) -> std::optional<double> {
      if (!r.target_hit) return std::nullopt;
      return static_cast<double>(r.target_hit->step);
    };
    // A mean step need not be whole; one run's is.
    const auto step_format = [](double v, bool) { return v == std::floor(v) ? fixed(v, 0) : fixed(v, 1); };
    columns.push_back({"target_step", "target_step", step, step_format});
    columns.push_back({"target_sim", "target_sim_time_s",
                       [](const Run& r) -> std::optional<double> {
                         if (!r.target_hit) return std::nullopt;
                         return r.target_hit->sim_time_s;
                       },
                       duration});
  }
  columns.push_back({"wall_s", "wall_s", [](const Run& r) { return r.wall_seconds; }, digits(1, 3)});
  return columns;
}

// The mean and sample standard deviation (none for one value) of the runs
// that have a value; `count` says how many had one.
struct Stats {
  size_t count = 0;
  double mean = NAN;
  std::optional<double> std;
};

Stats stats(const VariantRuns& group, const Column& column) {
  std::vector<double> values;
  for (const Run* r : group) {
    if (auto v = column.value(*r)) values.push_back(*v);
  }
  Stats s;
  s.count = values.size();
  if (values.empty()) return s;
  const util::MeanStd m = util::mean_std(values);
  s.mean = m.mean;
  if (values.size() > 1) s.std = m.std;
  return s;
}

bool is_target(const Column& column) { return column.csv_header.rfind("target_", 0) == 0; }

std::vector<std::vector<std::string>> rows(const std::vector<Run>& results, bool pretty) {
  const auto groups = group_by_variant(results);
  const bool seeded = std::any_of(groups.begin(), groups.end(), [](const VariantRuns& g) { return g.size() > 1; });
  const auto columns = number_columns(results);
  std::vector<std::string> header = {"variant", "strategy", "nodes", "steps"};
  if (seeded) header.push_back("seeds");
  for (const auto& c : columns) {
    header.push_back(pretty ? c.pretty_header : c.csv_header);
    if (seeded && !pretty) header.push_back(c.csv_header + "_std");
    if (seeded && !pretty && c.csv_header == "target_step") header.push_back("target_reached");
  }
  std::vector<std::vector<std::string>> table{header};
  for (const auto& group : groups) {
    const Run& r = *group.front();
    std::vector<std::string> row = {r.variant.empty() ? r.name : r.variant, r.strategy_plugin, std::to_string(r.nodes),
                                    std::to_string(r.steps)};
    if (seeded) row.push_back(std::to_string(group.size()));
    for (const auto& c : columns) {
      const Stats s = stats(group, c);
      std::string cell = s.count ? c.format(s.mean, pretty) : "-";
      if (pretty && s.std) cell += " ± " + c.format(*s.std, pretty);
      if (pretty && is_target(c) && s.count && s.count < group.size()) {
        cell += " (" + std::to_string(s.count) + "/" + std::to_string(group.size()) + ")";
      }
      row.push_back(cell);
      if (seeded && !pretty) row.push_back(s.std ? c.format(*s.std, false) : "-");
      if (seeded && !pretty && c.csv_header == "target_step") row.push_back(std::to_string(s.count));
    }
    table.push_back(row);
  }
  return table;
}

// Display width: "±" is one column but two bytes.
size_t width_of(const std::string& cell) {
  size_t width = 0;
  for (unsigned char c : cell) width += (c & 0xC0) != 0x80;
  return width;
}

}  // namespace

std::string comparison_table(const std::vector<Run>& results) {
  auto table = rows(results, true);
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], width_of(row[i]));
  }
  std::ostringstream out;
  for (size_t r = 0; r < table.size(); ++r) {
    for (size_t i = 0; i < table[r].size(); ++i) {
      const auto& cell = table[r][i];
      const std::string pad(width[i] - width_of(cell), ' ');
      if (i) out << "  ";
      out << (i < 2 ? cell + pad : pad + cell);
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

std::string comparison_csv(const std::vector<Run>& results) {
  std::ostringstream out;
  for (const auto& row : rows(results, false)) {
    for (size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << (row[i] == "-" ? "" : row[i]);
    out << '\n';
  }
  return out.str();
}

}  // namespace exogym::runtime::command
