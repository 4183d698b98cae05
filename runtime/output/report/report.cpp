#include "exogym/runtime/output/report/report.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "exogym/runtime/output/report/finished_run.h"
#include "exogym/runtime/output/report/report_page.h"
#include "exogym/runtime/output/report/seed_groups.h"
#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output::report {

namespace fs = std::filesystem;

namespace {

// Two runs may share a folder name ("ddp" of two comparisons): name those
// by their parent folder too.
void make_labels_unique(std::vector<FinishedRun>& runs) {
  for (size_t i = 0; i < runs.size(); ++i) {
    bool clash = false;
    for (size_t j = 0; j < runs.size(); ++j) clash = clash || (i != j && runs[i].label == runs[j].label);
    if (clash) {
      const fs::path dir = folder_path(runs[i].dir);
      runs[i].label = (dir.parent_path().filename() / dir.filename()).string();
    }
  }
}

std::string joined(const std::set<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

// Runs of different models validate different metrics (accuracy, ...):
// each chart draws the runs that have its column; say which lack what.
// (Strategy metrics differ between strategies by design: their charts name
// the runs that do not record them.)
void note_different_validation(const std::vector<FinishedRun>& runs, std::vector<std::string>& notes) {
  std::set<std::string> all;
  for (const auto& run : runs) all.insert(run.validation.header.begin(), run.validation.header.end());
  for (const auto& run : runs) {
    std::set<std::string> missing;
    for (const auto& column : all) {
      if (!run.validation.has(column)) missing.insert(column);
    }
    if (!missing.empty()) {
      notes.push_back(run.label + "'s validation.csv has no " + joined(missing) + ": its charts leave it out.");
    }
  }
}

bool has_config(const fs::path& dir) { return util::path_kind(dir / "config.json") != util::PathKind::Missing; }

// The seed-N run folders in `dir` (a variant run over "seeds"), by seed.
std::vector<fs::path> seed_folders(const fs::path& dir) {
  std::vector<std::pair<uint64_t, fs::path>> seeds;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool numbered = name.size() > 5 && name.compare(0, 5, "seed-") == 0 &&
                          name.find_first_not_of("0123456789", 5) == std::string::npos && name.size() < 25;
    if (numbered && util::path_kind(entry.path()) == util::PathKind::Directory && has_config(entry.path())) {
      seeds.emplace_back(std::stoull(name.substr(5)), entry.path());
    }
  }
  std::sort(seeds.begin(), seeds.end());
  std::vector<fs::path> folders;
  for (auto& seed : seeds) folders.push_back(std::move(seed.second));
  return folders;
}

// A variant's run folder, or its seed-N folders.
void add_variant(const fs::path& dir, std::vector<fs::path>& runs) {
  if (has_config(dir)) {
    runs.push_back(dir);
    return;
  }
  const auto seeds = seed_folders(dir);
  runs.insert(runs.end(), seeds.begin(), seeds.end());
}

// The run folders of a comparison folder: its variants (or their seeds), in
// the order of the first column of its comparison.csv when it has one (the
// order they ran in); a single run over seeds: its seed-N folders.
std::vector<fs::path> variant_folders(const fs::path& dir) {
  std::vector<fs::path> runs = seed_folders(dir);
  if (!runs.empty()) return runs;
  std::istringstream table(util::path_kind(dir / "comparison.csv") == util::PathKind::Regular
                               ? util::read_regular_file(dir / "comparison.csv")
                               : std::string());
  std::string line;
  if (table && std::getline(table, line)) {
    while (std::getline(table, line)) {
      if (!line.empty()) add_variant(dir / line.substr(0, line.find(',')), runs);
    }
  }
  if (!runs.empty()) return runs;
  std::vector<fs::path> variants;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (util::path_kind(entry.path()) == util::PathKind::Directory) variants.push_back(entry.path());
  }
  std::sort(variants.begin(), variants.end());
  for (const auto& variant : variants) add_variant(variant, runs);
  return runs;
}

}  // namespace

std::vector<fs::path> expand_run_folders(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> runs;
  for (const auto& dir : dirs) {
    // Checked without throwing: a loop of symbolic links is the run's own
    // error (read_finished_run's), not the whole report's.
    const auto variants = util::path_kind(dir) == util::PathKind::Directory && !has_config(dir)
                              ? variant_folders(dir)
                              : std::vector<fs::path>{};
    if (variants.empty()) {
      runs.push_back(dir);
    } else {
      runs.insert(runs.end(), variants.begin(), variants.end());
    }
  }
  return runs;
}

ReportOutcome write_report(const std::vector<fs::path>& dirs, const fs::path& file, const std::string& title) {
  ReportOutcome outcome;
  std::vector<FinishedRun> runs;
  for (const auto& dir : dirs) {
    try {
      runs.push_back(read_finished_run(dir));
      outcome.shown.push_back(dir);
    } catch (const sdk::DataError& e) {
      outcome.notes.push_back(std::string(e.what()) + ": left out.");
    }
  }
  if (runs.empty()) {
    std::string message = "no run to report";
    for (const auto& note : outcome.notes) message += "\n  " + note;
    throw sdk::DataError(message);
  }
  runs = merge_seeds(std::move(runs));
  make_labels_unique(runs);
  for (const auto& run : runs) {
    if (!run.finished()) {
      outcome.notes.push_back(run.label + " (" + run.dir.string() +
                              ") has no summary.json: it is still running, or it stopped or failed; its curves "
                              "go as far as its files.");
    }
  }
  note_different_validation(runs, outcome.notes);
  util::write_file_atomically(file, report_html(title, runs, outcome.notes));
  return outcome;
}

}  // namespace exogym::runtime::output::report
