#include "exogym/runtime/output/report/line_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "exogym/runtime/output/report/downsample.h"
#include "exogym/runtime/util/units.h"

namespace exogym::runtime::output::report {

namespace {

constexpr int kLeft = 64, kRight = 16, kTop = 12, kBottom = 42;
constexpr int kPlotHeight = 220;
constexpr int kWidth = kLeft + kPlotWidth + kRight, kHeight = kTop + kPlotHeight + kBottom;

struct AxisRange {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();

  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
  // A flat series still gets a visible band around its value; so does one
  // that is flat but for rounding (a mean over seeds), whose ticks would be
  // steps too small to add to the values.
  AxisRange padded() const {
    if (empty()) return {0, 1};
    if (hi - lo > 1e-9 * std::max(std::abs(lo), std::abs(hi))) return *this;
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.05;
    return {lo - pad, hi + pad};
  }
};

// About `wanted` round tick values (1, 2 or 5 times a power of ten) in `r`.
std::vector<double> nice_ticks(AxisRange r, int wanted) {
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

// A band's edges, each down-sampled as a series is: y + spread, y - spread.
struct Band {
  std::vector<Point> upper, lower;
};

Band band_of(const Series& s, double x_min, double x_max) {
  if (s.spread.empty()) return {};
  std::vector<double> upper(s.y.size(), NAN), lower(s.y.size(), NAN);
  for (size_t i = 0; i < s.y.size() && i < s.spread.size(); ++i) {
    upper[i] = s.y[i] + s.spread[i];
    lower[i] = s.y[i] - s.spread[i];
  }
  return {downsample(s.x, upper, x_min, x_max, kPlotWidth), downsample(s.x, lower, x_min, x_max, kPlotWidth)};
}

// The series as drawn on a log x axis: x replaced by log10(x), NaN (not
// drawn) where x <= 0.
std::vector<Series> with_log_x(std::vector<Series> series) {
  for (auto& s : series) {
    for (auto& x : s.x) x = x > 0 ? std::log10(x) : NAN;
  }
  return series;
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
  if (format == AxisFormat::Bytes) return util::format_bytes(value);
  if (format == AxisFormat::Seconds) return util::format_duration(value);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

std::string line_chart_svg(const ChartSpec& spec, const std::vector<Series>& given) {
  const std::vector<Series> series = spec.log_x ? with_log_x(given) : given;
  AxisRange xr, yr;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (std::isfinite(s.y[i])) xr.add(s.x[i]);
    }
  }
  xr = xr.padded();
  std::vector<std::vector<Point>> drawn;
  std::vector<Band> bands;
  for (const auto& s : series) {
    drawn.push_back(downsample(s.x, s.y, xr.lo, xr.hi, kPlotWidth));
    for (const auto& p : drawn.back()) yr.add(p.y);
    bands.push_back(band_of(s, xr.lo, xr.hi));
    for (const auto& p : bands.back().upper) yr.add(p.y);
    for (const auto& p : bands.back().lower) yr.add(p.y);
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
        << "\" text-anchor=\"middle\">" << escape_html(format_value(spec.log_x ? std::pow(10.0, t) : t, spec.x.format))
        << "</text>";
  }
  out << "<rect class=\"frame\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotWidth << "\" height=\""
      << kPlotHeight << "\"/><text class=\"axis-label\" x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << kHeight - 6
      << "\" text-anchor=\"middle\">" << escape_html(spec.x.label) << "</text><text class=\"axis-label\" "
      << "transform=\"rotate(-90)\" x=\"" << -(kTop + kPlotHeight / 2) << "\" y=\"14\" text-anchor=\"middle\">"
      << escape_html(spec.y.label) << "</text></g>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const Band& band = bands[i];
    if (band.upper.empty()) continue;
    out << "<polygon class=\"band\" data-label=\"" << escape_html(series[i].label) << "\" data-points=\""
        << band.upper.size() + band.lower.size() << "\" fill=\"" << escape_html(series[i].colour) << "\" points=\"";
    for (size_t j = 0; j < band.upper.size(); ++j) {
      out << (j ? " " : "") << coordinate(px(band.upper[j].x)) << ',' << coordinate(py(band.upper[j].y));
    }
    for (auto p = band.lower.rbegin(); p != band.lower.rend(); ++p) {
      out << ' ' << coordinate(px(p->x)) << ',' << coordinate(py(p->y));
    }
    out << "\"><title>" << escape_html(series[i].label) << " ± 1 standard deviation over seeds</title></polygon>\n";
  }
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
