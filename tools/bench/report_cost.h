#pragma once
// What report.html costs: the time to write it for a 5-variant comparison of
// 600 steps, and its size for a 100,000-step run (docs/reports.md).
#include <nlohmann/json.hpp>

#include "bench/options.h"

namespace exogym::bench {

// Fills run folders with synthetic curves through the runtime's RunWriter
// (training them would measure training, not the report), then times
// write_report, the fastest of 5; and the cost of one ctx.record() call.
// Prints its table; returns {"reports": rows, "record_microseconds": ...}.
nlohmann::json report_section(const BenchOptions& options);

}  // namespace exogym::bench
