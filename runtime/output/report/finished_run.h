#pragma once
// A finished (or stopped) run folder read back from its files, which is all
// a report needs: the same report comes from the run that just ended, from a
// resumed run and from folders copied from another machine.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace exogym::runtime::output::report {

// A CSV file of numbers, column by column. Empty cells and unparsable
// values read as NaN. Of runs over several seeds (seed_groups.h): the mean
// of each row over the seeds, and in `spread` the sample standard deviation.
struct NumericTable {
  std::vector<std::string> header;
  std::map<std::string, std::vector<double>> columns;
  std::map<std::string, std::vector<double>> spread;  // empty: one run

  size_t rows() const { return columns.empty() ? 0 : columns.begin()->second.size(); }
  bool has(const std::string& column) const { return columns.count(column) > 0; }
  const std::vector<double>& at(const std::string& column) const { return columns.at(column); }
};

// One strategy metric (metrics.csv), averaged over the nodes that recorded
// it at each step, steps in increasing order.
struct MetricSeries {
  std::vector<double> step, value;
  std::vector<double> spread;  // over seeds, as NumericTable::spread
};

struct FinishedRun {
  std::filesystem::path dir;
  // How the report names the run: the variant, or the run's name (a
  // seed-N folder's is its parent folder's name: the variant's).
  std::string label;
  nlohmann::json config;                  // config.json
  std::optional<nlohmann::json> summary;  // summary.json: absent while running or after a stop
  NumericTable train, validation;
  std::map<std::string, MetricSeries> metrics;
  // Of runs over several seeds (seed_groups.h): their seeds, and summary.json's
  // numbers' standard deviations beside `summary`'s means.
  std::vector<uint64_t> seeds;
  std::optional<nlohmann::json> summary_spread;

  bool finished() const { return summary.has_value(); }
};

// Reads `dir`. A folder without config.json and train.csv is not a run:
// sdk::DataError naming the folder. A missing or damaged optional file
// (validation.csv, metrics.csv, summary.json) is left out.
FinishedRun read_finished_run(const std::filesystem::path& dir);

// `dir` absolute and normalised, without a trailing separator, so that its
// filename() is the folder's name ("runs/x/" -> "/.../runs/x").
std::filesystem::path folder_path(const std::filesystem::path& dir);

// Reads one CSV file of numbers (the first line is the header). Throws
// sdk::DataError naming the file when it cannot be read.
NumericTable read_numeric_csv(const std::filesystem::path& file);

}  // namespace exogym::runtime::output::report
