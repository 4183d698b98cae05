#include "exogym/runtime/output/report/finished_run.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  size_t start = 0;
  for (size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1) {
    cells.push_back(line.substr(start, comma - start));
  }
  cells.push_back(line.substr(start));
  return cells;
}

double parse_number(const std::string& cell) {
  if (cell.empty()) return NAN;
  char* end = nullptr;
  const double value = std::strtod(cell.c_str(), &end);
  return end == cell.c_str() ? NAN : value;
}

// A JSON object file of the run folder; nullopt when there is none. The
// runtime writes them whole (atomic_file.h), so one that does not parse was
// not written by it: an sdk::DataError naming it, not a run "still running".
std::optional<json> read_json(const fs::path& file) {
  if (util::path_kind(file) == util::PathKind::Missing) return std::nullopt;
  const std::string text = util::read_regular_file(file);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) throw sdk::DataError(file.string() + ": not a JSON object (damaged?)");
  return value;
}

// metrics.csv holds one row per node and step (step,node,name,value); nodes
// of several processes arrive in any order.
std::map<std::string, MetricSeries> read_metrics(const fs::path& file) {
  std::map<std::string, std::map<double, std::pair<double, int>>> sums;
  std::istringstream in(util::read_regular_file(file));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const auto cells = split_csv_line(line);
    if (cells.size() != 4) continue;
    const double step = parse_number(cells[0]), value = parse_number(cells[3]);
    if (std::isnan(step)) continue;
    auto& sum = sums[cells[2]][step];
    sum.first += value;
    sum.second += 1;
  }
  std::map<std::string, MetricSeries> metrics;
  for (const auto& [name, by_step] : sums) {
    MetricSeries& series = metrics[name];
    for (const auto& [step, sum] : by_step) {
      series.step.push_back(step);
      series.value.push_back(sum.first / sum.second);
    }
  }
  return metrics;
}

}  // namespace

NumericTable read_numeric_csv(const fs::path& file) {
  std::istringstream in(util::read_regular_file(file));
  NumericTable table;
  std::string line;
  if (!std::getline(in, line)) return table;
  table.header = split_csv_line(line);
  std::vector<std::vector<double>*> columns;
  for (const auto& name : table.header) columns.push_back(&table.columns[name]);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto cells = split_csv_line(line);
    // A last line cut short by a crash is dropped rather than misread.
    if (cells.size() != columns.size()) continue;
    for (size_t i = 0; i < cells.size(); ++i) columns[i]->push_back(parse_number(cells[i]));
  }
  return table;
}

fs::path folder_path(const fs::path& dir) {
  fs::path path = fs::absolute(dir).lexically_normal();
  return path.has_filename() ? path : path.parent_path();
}

FinishedRun read_finished_run(const fs::path& dir) {
  using util::PathKind;
  if (util::path_kind(dir) != PathKind::Directory) {
    std::error_code ec;
    const bool present = fs::symlink_status(dir, ec).type() != fs::file_type::not_found;
    throw sdk::DataError(dir.string() + (present ? ": not a folder (or a loop of symbolic links)" : ": not a folder"));
  }
  if (util::path_kind(dir / "config.json") == PathKind::Missing ||
      util::path_kind(dir / "train.csv") == PathKind::Missing) {
    throw sdk::DataError(dir.string() + ": not a run folder (it has no config.json and train.csv)");
  }
  FinishedRun run;
  run.dir = dir;
  auto config = read_json(dir / "config.json");
  if (!config) throw sdk::DataError((dir / "config.json").string() + ": missing");
  run.config = std::move(*config);
  const fs::path folder = folder_path(dir);
  run.label = folder.filename().string();
  const json seed = run.config.value("seed", json());
  if (seed.is_number_unsigned() && run.label == "seed-" + std::to_string(seed.get<uint64_t>())) {
    run.label = folder.parent_path().filename().string();
  }
  run.summary = read_json(dir / "summary.json");
  run.train = read_numeric_csv(dir / "train.csv");
  if (util::path_kind(dir / "validation.csv") != PathKind::Missing)
    run.validation = read_numeric_csv(dir / "validation.csv");
  if (util::path_kind(dir / "metrics.csv") != PathKind::Missing) run.metrics = read_metrics(dir / "metrics.csv");
  return run;
}

}  // namespace exogym::runtime::output::report
