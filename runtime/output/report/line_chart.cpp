#include "exogym/runtime/output/report/line_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "exogym/runtime/manifest/units.h"
#include "exogym/runtime/output/report/downsample.h"

namespace exogym::runtime::output::report {

namespace {

constexpr int kLeft = 64, kRight = 16, kTop = 12, kBottom = 42;
constexpr int kPlotHeight = 220;
constexpr int kWidth = kLeft + kPlotWidth + kRight, kHeight = kTop + kPlotHeight + kBottom;

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();

  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
  // A flat series still gets a visible band around its value.
  Range padded() const {
    if (empty()) return {0, 1};
    if (hi > lo) return *this;
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.05;
    return {lo - pad, hi + pad};
  }
};

// About `wanted` round tick values (1, 2 or 5 times a power of ten) in `r`.
std::vector<double> nice_ticks(Range r, int wanted) {
  const double raw = (r.hi - r.lo) / wanted;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (raw <= step) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(r.lo / step) * step; t <= r.hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string coordinate(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_value(double value, AxisFormat format) {
  if (!std::isfinite(value)) return "-";
  if (format == AxisFormat::Bytes) return manifest::format_bytes(value);
  if (format == AxisFormat::Seconds) return manifest::format_duration(value);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

std::string line_chart_svg(const ChartSpec& spec, const std::vector<Series>& series) {
  Range xr, yr;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (std::isfinite(s.y[i])) xr.add(s.x[i]);
    }
  }
  xr = xr.padded();
  std::vector<std::vector<Point>> drawn;
  for (const auto& s : series) {
    drawn.push_back(downsample(s.x, s.y, xr.lo, xr.hi, kPlotWidth));
    for (const auto& p : drawn.back()) yr.add(p.y);
  }
  yr = yr.padded();
  const auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * kPlotWidth; };
  const auto py = [&](double y) { return kTop + (yr.hi - y) / (yr.hi - yr.lo) * kPlotHeight; };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"line-chart\" id=\"" << escape_html(spec.id)
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" role=\"img\">\n<g class=\"axes\">";
  for (double t : nice_ticks(yr, 5)) {
    const std::string y = coordinate(py(t));
    out << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotWidth << "\" y1=\"" << y << "\" y2=\""
        << y << "\"/><text x=\"" << kLeft - 6 << "\" y=\"" << y << "\" dy=\"0.32em\" text-anchor=\"end\">"
        << escape_html(format_value(t, spec.y.format)) << "</text>";
  }
  for (double t : nice_ticks(xr, 6)) {
    const std::string x = coordinate(px(t));
    out << "<line class=\"grid\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << kTop << "\" y2=\""
        << kTop + kPlotHeight << "\"/><text x=\"" << x << "\" y=\"" << kTop + kPlotHeight + 16
        << "\" text-anchor=\"middle\">" << escape_html(format_value(t, spec.x.format)) << "</text>";
  }
  out << "<rect class=\"frame\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotWidth << "\" height=\""
      << kPlotHeight << "\"/><text class=\"axis-label\" x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << kHeight - 6
      << "\" text-anchor=\"middle\">" << escape_html(spec.x.label) << "</text><text class=\"axis-label\" "
      << "transform=\"rotate(-90)\" x=\"" << -(kTop + kPlotHeight / 2) << "\" y=\"14\" text-anchor=\"middle\">"
      << escape_html(spec.y.label) << "</text></g>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    out << "<polyline class=\"series\" data-label=\"" << escape_html(series[i].label) << "\" data-points=\""
        << drawn[i].size() << "\" stroke=\"" << escape_html(series[i].colour) << "\" points=\"";
    for (size_t j = 0; j < drawn[i].size(); ++j) {
      out << (j ? " " : "") << coordinate(px(drawn[i][j].x)) << ',' << coordinate(py(drawn[i][j].y));
    }
    out << "\"><title>" << escape_html(series[i].label) << "</title></polyline>\n";
  }
  out << "</svg>";
  return out.str();
}

}  // namespace exogym::runtime::output::report
