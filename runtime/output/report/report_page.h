#pragma once
// The report as one self-contained HTML page: no script, font, image or
// style sheet is fetched, so it opens offline, mails as one file and prints.
#include <string>
#include <vector>

#include "exogym/runtime/output/report/finished_run.h"

namespace exogym::runtime::output::report {

// The colour of the i-th run in every chart and table.
std::string series_colour(size_t i);

// The page for `runs` (one, or the variants of a comparison, or any runs
// exogym-report was given). `notes` are shown at the top: what could not be
// shown and why.
std::string report_html(const std::string& title, const std::vector<FinishedRun>& runs,
                        const std::vector<std::string>& notes);

}  // namespace exogym::runtime::output::report
