#pragma once
// report.html for run folders: read them, note what cannot be shown, write
// the page (atomically). exogym-run calls it at the end of every run and
// comparison (and when one stops); exogym-report for any finished runs.
#include <filesystem>
#include <string>
#include <vector>

namespace exogym::runtime::output::report {

struct ReportOutcome {
  std::vector<std::filesystem::path> shown;  // the run folders in the report
  std::vector<std::string> notes;            // what could not be shown, and why (also on the page)
};

// Reads each folder of `runs` and writes the report of those that are runs
// to `file`. A folder that is not a run, a run that did not finish (no
// summary.json) and runs that validate different metrics are notes, not
// errors; sdk::DataError when no folder is a run; sdk::Error naming `file`
// when it cannot be written.
// The run folders a user means by `dirs`: a run folder itself; a
// comparison's folder (no config.json, its variants in subfolders) as its
// variants, in the order of its comparison.csv. Other paths are kept as
// they are, for write_report to note.
std::vector<std::filesystem::path> expand_run_folders(const std::vector<std::filesystem::path>& dirs);

ReportOutcome write_report(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& file,
                           const std::string& title);

}  // namespace exogym::runtime::output::report
