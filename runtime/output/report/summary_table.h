#pragma once
// The report's table: one row per run, its final numbers from summary.json
// (or, for a run that did not finish, what its CSV files reached).
#include <string>
#include <vector>

#include "exogym/runtime/output/report/finished_run.h"

namespace exogym::runtime::output::report {

// The model's validation metrics (accuracy, ...) the runs' validation.csv
// hold, in first-seen order: validation.csv's global_<name> columns.
std::vector<std::string> model_metric_names(const std::vector<FinishedRun>& runs);

// An HTML <table class="summary">; `colours` marks each run's row with its
// series colour.
std::string summary_table_html(const std::vector<FinishedRun>& runs, const std::vector<std::string>& colours);

}  // namespace exogym::runtime::output::report
