#include "exogym/runtime/output/report/summary_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/output/report/line_chart.h"

namespace exogym::runtime::output::report {

using nlohmann::json;

namespace {

// A number of the table; over seeds, with its standard deviation.
struct Number {
  double value = NAN, spread = NAN;
};

double number_at(const std::optional<json>& doc, const std::string& path) {
  if (!doc) return NAN;
  const json::json_pointer pointer(path);
  if (!doc->contains(pointer)) return NAN;
  const json& value = doc->at(pointer);
  if (value.is_number()) return value.get<double>();
  // A non-finite number as summary.json writes it (json_numbers.h); other text is none.
  const bool written = value.is_string() && (value == "inf" || value == "-inf" || value == "nan");
  return written ? json_number(value) : NAN;
}

// summary.json's value at `path` (a JSON pointer), or NaN.
Number summary_number(const FinishedRun& run, const std::string& path) {
  return {number_at(run.summary, path), number_at(run.summary_spread, path)};
}

// The last finite value of a CSV column, for runs that stopped early.
Number last_value(const NumericTable& table, const std::string& column) {
  if (!table.has(column)) return {};
  const auto& values = table.at(column);
  for (size_t i = values.size(); i-- > 0;) {
    if (!std::isfinite(values[i])) continue;
    const auto spread = table.spread.find(column);
    return {values[i], spread == table.spread.end() ? NAN : spread->second[i]};
  }
  return {};
}

// A final number: summary.json's for a finished run, else the CSV's last.
Number final_number(const FinishedRun& run, const std::string& summary_path, const NumericTable& table,
                    const std::string& column) {
  return run.finished() ? summary_number(run, summary_path) : last_value(table, column);
}

std::string cell(Number number, AxisFormat format = AxisFormat::Number) {
  std::string text = format_value(number.value, format);
  if (std::isfinite(number.value) && std::isfinite(number.spread)) text += " ± " + format_value(number.spread, format);
  return "<td>" + escape_html(text) + "</td>";
}

std::string status(const FinishedRun& run) {
  std::string text = run.finished() ? "finished" : "did not finish";
  if (!run.seeds.empty()) text += ", " + std::to_string(run.seeds.size()) + " seeds";
  return text;
}

std::string ratio_cell(double ratio) {
  if (!std::isfinite(ratio)) return "<td>-</td>";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "<td>%.3g×</td>", ratio);
  return buffer;
}

}  // namespace

std::vector<std::string> model_metric_names(const std::vector<FinishedRun>& runs) {
  std::vector<std::string> names;
  for (const auto& run : runs) {
    for (const auto& column : run.validation.header) {
      if (column.rfind("global_", 0) != 0) continue;
      const std::string name = column.substr(7);
      if (name == "loss" || name == "perplexity") continue;
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

std::string summary_table_html(const std::vector<FinishedRun>& runs, const std::vector<std::string>& colours) {
  const auto metrics = model_metric_names(runs);
  std::ostringstream out;
  out << "<table class=\"summary\">\n<thead><tr><th>run</th><th>status</th><th>strategy</th><th>nodes</th>"
      << "<th>steps</th><th>global loss</th><th>local loss</th>";
  for (const auto& m : metrics) out << "<th>global " << escape_html(m) << "</th>";
  out << "<th>train loss</th><th>sent / node</th><th>vs DDP</th><th>simulated time</th><th>compute</th>"
      << "<th>communication</th><th>waiting</th><th>wall</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const FinishedRun& run = runs[i];
    const Number steps = run.finished() ? summary_number(run, "/steps") : last_value(run.train, "step");
    out << "<tr><th scope=\"row\"><span class=\"swatch\" style=\"border-color:" << escape_html(colours[i])
        << "\"></span>" << escape_html(run.label) << "</th><td>" << status(run) << "</td><td>"
        << escape_html(run.config.value(json::json_pointer("/strategy/plugin"), std::string("?"))) << "</td>"
        << cell({run.config.value(json::json_pointer("/nodes"), std::nan(""))}) << cell({steps.value})
        << cell(final_number(run, "/final/global_loss", run.validation, "global_loss"))
        << cell(final_number(run, "/final/local_loss", run.validation, "local_loss"));
    for (const auto& m : metrics) {
      out << cell(final_number(run, "/final/global_" + m, run.validation, "global_" + m));
    }
    out << cell(final_number(run, "/last_train_loss", run.train, "train_loss"))
        << cell(final_number(run, "/communication/bytes_sent_per_node", run.train, "bytes_sent"), AxisFormat::Bytes)
        << ratio_cell(summary_number(run, "/communication/ratio_to_ddp").value)
        << cell(final_number(run, "/simulated/time_s", run.train, "sim_time_s"), AxisFormat::Seconds)
        << cell(summary_number(run, "/simulated/compute_s"), AxisFormat::Seconds)
        << cell(summary_number(run, "/simulated/communication_s"), AxisFormat::Seconds)
        << cell(summary_number(run, "/simulated/waiting_s"), AxisFormat::Seconds)
        << cell(summary_number(run, "/wall_seconds"), AxisFormat::Seconds) << "</tr>\n";
  }
  out << "</tbody>\n</table>\n";
  return out.str();
}

}  // namespace exogym::runtime::output::report
