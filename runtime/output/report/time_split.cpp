#include "exogym/runtime/output/report/time_split.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "exogym/runtime/output/json_numbers.h"
#include "exogym/runtime/output/report/line_chart.h"

namespace exogym::runtime::output::report {

using nlohmann::json;

namespace {

constexpr int kLabelWidth = 150, kBarWidth = 520, kBarHeight = 14, kGap = 4, kRunGap = 10, kAxisHeight = 40;
constexpr const char* kParts[] = {"compute_s", "communication_s", "waiting_s"};
constexpr const char* kPartColours[] = {"#4e79a7", "#f28e2b", "#bab0ac"};

const json* per_node(const FinishedRun& run) {
  if (!run.summary) return nullptr;
  const json::json_pointer pointer("/communication/per_node");
  if (!run.summary->contains(pointer) || !run.summary->at(pointer).is_array()) return nullptr;
  return &run.summary->at(pointer);
}

// An infinite time (a simulated clock that overflowed) draws no bar.
double part(const json& node, const char* name) {
  const double seconds = node.contains(name) ? json_number(node[name]) : 0.0;
  return std::isfinite(seconds) ? seconds : 0.0;
}

}  // namespace

std::string time_split_svg(const std::vector<FinishedRun>& runs) {
  double longest = 0;
  int rows = 0, drawn_runs = 0;
  for (const auto& run : runs) {
    const json* nodes = per_node(run);
    if (!nodes || nodes->empty()) continue;
    ++drawn_runs;
    rows += std::min<int>(static_cast<int>(nodes->size()), kMaxNodesDrawn);
    for (const auto& node : *nodes) {
      longest = std::max(longest, part(node, "compute_s") + part(node, "communication_s") + part(node, "waiting_s"));
    }
  }
  if (drawn_runs == 0) return "<p>No run finished, so no node's time is known.</p>\n";
  if (longest <= 0) longest = 1;
  const int height = rows * (kBarHeight + kGap) + drawn_runs * kRunGap + kAxisHeight;
  const int width = kLabelWidth + kBarWidth + 20;
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"time-split\" viewBox=\"0 0 " << width << ' ' << height
      << "\" width=\"" << width << "\" height=\"" << height << "\" role=\"img\">\n";
  int y = 0;
  for (const auto& run : runs) {
    const json* nodes = per_node(run);
    if (!nodes || nodes->empty()) continue;
    y += kRunGap;
    const int shown = std::min<int>(static_cast<int>(nodes->size()), kMaxNodesDrawn);
    for (int n = 0; n < shown; ++n) {
      const json& node = (*nodes)[n];
      std::string label = run.label + " · node " + std::to_string(node.value("node", n));
      if (n == shown - 1 && shown < static_cast<int>(nodes->size())) {
        label += " (+" + std::to_string(nodes->size() - shown) + " more)";
      }
      out << "<text x=\"" << kLabelWidth - 6 << "\" y=\"" << y + kBarHeight / 2 << "\" dy=\"0.32em\" "
          << "text-anchor=\"end\">" << escape_html(label) << "</text>";
      double x = kLabelWidth;
      for (int p = 0; p < 3; ++p) {
        const double seconds = part(node, kParts[p]);
        const double w = seconds / longest * kBarWidth;
        out << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << kBarHeight << "\" fill=\""
            << kPartColours[p] << "\"><title>" << escape_html(label) << ": " << kParts[p] << " "
            << escape_html(format_value(seconds, AxisFormat::Seconds)) << "</title></rect>";
        x += w;
      }
      out << '\n';
      y += kBarHeight + kGap;
    }
  }
  // Axis: 0 and the longest node time; legend of the three parts.
  out << "<line class=\"frame\" x1=\"" << kLabelWidth << "\" x2=\"" << kLabelWidth + kBarWidth << "\" y1=\"" << y + 4
      << "\" y2=\"" << y + 4 << "\"/><text x=\"" << kLabelWidth << "\" y=\"" << y + 16
      << "\" text-anchor=\"middle\">0</text><text x=\"" << kLabelWidth + kBarWidth << "\" y=\"" << y + 16
      << "\" text-anchor=\"middle\">" << escape_html(format_value(longest, AxisFormat::Seconds)) << "</text>";
  const char* names[] = {"compute", "communication", "waiting"};
  for (int p = 0; p < 3; ++p) {
    const int x = kLabelWidth + p * 130;
    out << "<rect x=\"" << x << "\" y=\"" << y + 24 << "\" width=\"12\" height=\"12\" fill=\"" << kPartColours[p]
        << "\"/><text x=\"" << x + 16 << "\" y=\"" << y + 34 << "\">" << names[p] << "</text>";
  }
  out << "\n</svg>\n";
  return out.str();
}

}  // namespace exogym::runtime::output::report
