#include "exogym/runtime/output/report/report.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "exogym/runtime/output/atomic_file.h"
#include "exogym/runtime/output/report/report_page.h"
#include "exogym/runtime/output/report/run_folder.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output::report {

namespace fs = std::filesystem;

namespace {

// Two runs may share a folder name ("ddp" of two comparisons): name those
// by their parent folder too.
void make_labels_unique(std::vector<RunFolder>& runs) {
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
void note_different_validation(const std::vector<RunFolder>& runs, std::vector<std::string>& notes) {
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

// The variant folders of a comparison folder, in the order of the first
// column of its comparison.csv when it has one (the order they ran in).
std::vector<fs::path> variant_folders(const fs::path& dir) {
  std::vector<fs::path> variants;
  std::ifstream table(dir / "comparison.csv");
  std::string line;
  if (table && std::getline(table, line)) {
    while (std::getline(table, line)) {
      const fs::path variant = dir / line.substr(0, line.find(','));
      if (!line.empty() && fs::exists(variant / "config.json")) variants.push_back(variant);
    }
  }
  if (!variants.empty()) return variants;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "config.json")) variants.push_back(entry.path());
  }
  std::sort(variants.begin(), variants.end());
  return variants;
}

}  // namespace

std::vector<fs::path> expand_run_folders(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> runs;
  for (const auto& dir : dirs) {
    const auto variants =
        fs::is_directory(dir) && !fs::exists(dir / "config.json") ? variant_folders(dir) : std::vector<fs::path>{};
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
  std::vector<RunFolder> runs;
  for (const auto& dir : dirs) {
    try {
      runs.push_back(read_run_folder(dir));
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
  make_labels_unique(runs);
  for (const auto& run : runs) {
    if (!run.finished()) {
      outcome.notes.push_back(run.label + " (" + run.dir.string() +
                              ") has no summary.json: it is still running, or it stopped or failed; its curves "
                              "go as far as its files.");
    }
  }
  note_different_validation(runs, outcome.notes);
  write_file_atomically(file, report_html(title, runs, outcome.notes));
  return outcome;
}

}  // namespace exogym::runtime::output::report
