#pragma once
// A line chart as inline SVG, drawn by our own code: a report must open
// without network and print as it looks, and the ~150 lines here are less to
// keep up than a pinned JavaScript library inlined into every report.
#include <string>
#include <vector>

namespace exogym::runtime::output::report {

enum class AxisFormat { Number, Bytes, Seconds };

struct Axis {
  std::string label;
  AxisFormat format = AxisFormat::Number;
};

struct Series {
  std::string label;   // the variant: the legend's text and the SVG's data-label
  std::string colour;  // a CSS colour
  std::vector<double> x, y;
  // Over seeds: y's standard deviation at each point; the chart shades
  // y ± spread. Empty: no band.
  std::vector<double> spread = {};
};

struct ChartSpec {
  std::string id;  // unique in the page (the test and links find charts by it)
  Axis x, y;
  // A logarithmic x axis: points are placed at log10(x), and those at x <= 0
  // (bytes before a strategy's first exchange) are left out.
  bool log_x = false;
};

// Plot area width in pixels: series are down-sampled to this many columns.
inline constexpr int kPlotWidth = 560;

// One <svg> with axes, ticks, grid lines and one <polyline class="series">
// per series, in order, carrying data-label and data-points (the number of
// points drawn after down-sampling). A series with a spread also has a
// <polygon class="band"> (drawn first, under every line) with the same
// data-label; its data-points counts the down-sampled upper edge's points
// and the lower edge's.
std::string line_chart_svg(const ChartSpec& spec, const std::vector<Series>& series);

// The label of an axis tick or a table cell: "1.5 MB", "2.3s", "0.25".
std::string format_value(double value, AxisFormat format);

// Text safe inside HTML and SVG elements and attribute values.
std::string escape_html(const std::string& text);

}  // namespace exogym::runtime::output::report
