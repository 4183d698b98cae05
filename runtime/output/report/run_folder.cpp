#include "exogym/runtime/output/report/run_folder.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

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

std::optional<json> read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return std::nullopt;  // a file cut short by a crash: treat as absent
  }
}

// metrics.csv holds one row per node and step (step,node,name,value); nodes
// of several processes arrive in any order.
std::map<std::string, MetricSeries> read_metrics(const fs::path& file) {
  std::map<std::string, std::map<double, std::pair<double, int>>> sums;
  std::ifstream in(file);
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
  std::ifstream in(file);
  if (!in) throw sdk::DataError(file.string() + ": cannot read");
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

RunFolder read_run_folder(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw sdk::DataError(dir.string() + ": not a folder");
  if (!fs::exists(dir / "config.json") || !fs::exists(dir / "train.csv")) {
    throw sdk::DataError(dir.string() + ": not a run folder (it has no config.json and train.csv)");
  }
  RunFolder run;
  run.dir = dir;
  run.label = folder_path(dir).filename().string();
  auto config = read_json(dir / "config.json");
  if (!config) throw sdk::DataError((dir / "config.json").string() + ": not valid JSON");
  run.config = std::move(*config);
  run.summary = read_json(dir / "summary.json");
  run.train = read_numeric_csv(dir / "train.csv");
  if (fs::exists(dir / "validation.csv")) run.validation = read_numeric_csv(dir / "validation.csv");
  if (fs::exists(dir / "metrics.csv")) run.metrics = read_metrics(dir / "metrics.csv");
  return run;
}

}  // namespace exogym::runtime::output::report
