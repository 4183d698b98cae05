#include "exogym/runtime/output/report/report_page.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "exogym/build_config.h"
#include "exogym/runtime/output/report/line_chart.h"
#include "exogym/runtime/output/report/smoothing.h"
#include "exogym/runtime/output/report/summary_table.h"
#include "exogym/runtime/output/report/time_split.h"

namespace exogym::runtime::output::report {

namespace {

// In print the summary table cannot scroll sideways: it wraps its cells and
// shrinks its font to the page's width instead of being cut at the edge.
constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;margin:24px auto;
max-width:1440px;padding:0 16px;line-height:1.4}
h1{font-size:1.5em;margin-bottom:4px}h2{font-size:1.2em;margin-top:32px;border-bottom:1px solid #ddd}
.meta{color:#666;font-size:.9em}.notes{background:#fff6e0;border:1px solid #e8c66b;padding:8px 24px}
table.summary{border-collapse:collapse;font-size:.9em}
table.summary th,table.summary td{border-bottom:1px solid #e5e5e5;padding:4px 8px;text-align:right;white-space:nowrap}
table.summary th[scope=row],table.summary td:nth-child(2),table.summary td:nth-child(3){text-align:left}
.swatch{display:inline-block;width:14px;height:0;border-top:4px solid;margin-right:6px;vertical-align:middle}
.table-wrap{overflow-x:auto}.controls{display:flex;flex-wrap:wrap;gap:8px 24px;margin-top:24px;font-size:.9em}
.charts{display:flex;flex-wrap:wrap;gap:16px}
figure{margin:0;break-inside:avoid;page-break-inside:avoid}figcaption{font-weight:600;margin-bottom:4px}
ul.legend{list-style:none;padding:0;margin:4px 0 0 64px;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:.85em}
svg{max-width:100%;height:auto}svg text{font-size:11px;fill:#333}.axis-label{fill:#555}
.grid{stroke:#ececec}.frame{fill:none;stroke:#999}.series{fill:none;stroke-width:1.5;stroke-linejoin:round}
.band{stroke:none;fill-opacity:.18}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:.8em}
@media print{body{margin:0;max-width:none}h2{break-after:avoid}.controls{display:none}
.table-wrap{overflow:visible}table.summary{font-size:.68em;width:100%}
table.summary th,table.summary td{white-space:normal;overflow-wrap:anywhere;padding:2px 3px}}
)";

// The points (x, y and, over seeds, spread) of one run for one chart, or
// false when the run lacks the data.
using Extract = std::function<bool(const FinishedRun&, Series& series)>;

Extract columns(const NumericTable FinishedRun::*table, std::string x, std::string y) {
  return [table, x, y](const FinishedRun& run, Series& series) {
    const NumericTable& t = run.*table;
    if (!t.has(x) || !t.has(y)) return false;
    series.x = t.at(x);
    series.y = t.at(y);
    if (t.spread.count(y)) series.spread = t.spread.at(y);
    return true;
  };
}

// The views a chart offers beyond its default one, chosen with the page's
// controls (kControls): the x axis on a log scale (bytes, simulated time,
// where DDP's curve would crush the others against zero), and the y values
// smoothed (the per-step train loss).
struct Views {
  bool log_x = false;
  bool smoothing = false;
};

// The smoothing control's choices: the EMA weight, and its code in the
// page's ids and attributes.
struct Smoothing {
  double weight;
  const char* code;
  const char* label;
};
constexpr Smoothing kSmoothing[] = {{0, "0", "none"}, {0.6, "60", "0.6"}, {0.9, "90", "0.9"}, {0.99, "99", "0.99"}};

// Without script (the page has none): each view sits in a container that
// CSS shows when the controls' state matches it (:has, in every browser
// since 2023); without :has, the default views alone show and the controls
// do nothing. Print shows what the screen shows.
std::string view_style() {
  std::string css =
      ".scale[data-scale=log]{display:none}body:has(#log-scale:checked) .scale[data-scale=linear]{display:none}"
      "body:has(#log-scale:checked) .scale[data-scale=log]{display:block}"
      ".smooth:not([data-smoothing=\"0\"]){display:none}\n";
  for (const auto& level : kSmoothing) {
    const std::string on = std::string("body:has(#smoothing-") + level.code + ":checked) .smooth";
    css += on + ":not([data-smoothing=\"" + level.code + "\"]){display:none}" + on + "[data-smoothing=\"" + level.code +
           "\"]{display:block}\n";
  }
  return css;
}

std::string controls_html() {
  std::string html =
      "<div class=\"controls\"><label><input type=\"checkbox\" id=\"log-scale\"> log scale for bytes sent and "
      "simulated time</label><span>train loss smoothing (EMA):";
  for (const auto& level : kSmoothing) {
    html += std::string(" <label><input type=\"radio\" name=\"smoothing\" id=\"smoothing-") + level.code +
            "\" value=\"" + level.code + "\"" + (level.weight == 0 ? " checked" : "") + "> " + level.label + "</label>";
  }
  return html + "</span></div>\n";
}

std::vector<Series> smoothed(std::vector<Series> series, double weight) {
  for (auto& s : series) {
    s.y = ema_smoothed(s.y, weight);
    if (!s.spread.empty()) s.spread = ema_smoothed(s.spread, weight);
  }
  return series;
}

// The chart's SVGs: one, or one per view, each in its containers.
std::string chart_views(const std::string& id, const Axis& x, const Axis& y, const std::vector<Series>& series,
                        Views views) {
  if (!views.log_x && !views.smoothing) return line_chart_svg({id, x, y}, series);
  std::string out;
  for (const bool log : {false, true}) {
    if (log && !views.log_x) continue;
    if (views.log_x) out += std::string("<div class=\"scale\" data-scale=\"") + (log ? "log" : "linear") + "\">";
    for (const auto& level : kSmoothing) {
      if (level.weight > 0 && !views.smoothing) continue;
      const bool smooths = level.weight > 0;
      const std::string view_id = id + (log ? "-log" : "") + (smooths ? std::string("-ema") + level.code : "");
      const Axis view_x{x.label + (log ? " (log scale)" : ""), x.format};
      const Axis view_y{y.label + (smooths ? std::string(" (EMA ") + level.label + ")" : ""), y.format};
      const std::string svg =
          line_chart_svg({view_id, view_x, view_y, log}, smooths ? smoothed(series, level.weight) : series);
      out += views.smoothing
                 ? std::string("<div class=\"smooth\" data-smoothing=\"") + level.code + "\">" + svg + "</div>"
                 : svg;
    }
    if (views.log_x) out += "</div>";
  }
  return out;
}

class Page {
 public:
  explicit Page(const std::vector<FinishedRun>& runs) : runs_(runs) {
    for (size_t i = 0; i < runs.size(); ++i) colours_.push_back(series_colour(i));
  }

  // A figure with its title, the chart (in each of its views) and the
  // legend; runs without the data are named under it.
  void chart(const std::string& id, const std::string& title, Axis x, Axis y, const Extract& extract,
             Views views = {}) {
    std::vector<Series> series;
    std::string missing;
    for (size_t i = 0; i < runs_.size(); ++i) {
      Series s{runs_[i].label, colours_[i], {}, {}};
      if (extract(runs_[i], s)) {
        series.push_back(std::move(s));
      } else {
        missing += (missing.empty() ? "" : ", ") + runs_[i].label;
      }
    }
    if (series.empty()) return;
    out_ << "<figure class=\"chart\" data-chart=\"" << escape_html(id) << "\"><figcaption>" << escape_html(title)
         << "</figcaption>\n"
         << chart_views(id, x, y, series, views) << "\n<ul class=\"legend\">";
    for (const auto& s : series) {
      out_ << "<li><span class=\"swatch\" style=\"border-color:" << escape_html(s.colour) << "\"></span>"
           << escape_html(s.label) << "</li>";
    }
    out_ << "</ul>";
    if (!missing.empty()) out_ << "<p class=\"meta\">Not recorded by " << escape_html(missing) << ".</p>";
    out_ << "</figure>\n";
  }

  std::ostringstream& out() { return out_; }
  const std::vector<std::string>& colours() const { return colours_; }

 private:
  const std::vector<FinishedRun>& runs_;
  std::vector<std::string> colours_;
  std::ostringstream out_;
};

const Axis kStep{"step"}, kSimTime{"simulated time", AxisFormat::Seconds};
const Axis kBytes{"bytes sent per node", AxisFormat::Bytes};

void training_charts(Page& page) {
  const auto train = &FinishedRun::train;
  const Axis loss{"train loss"};
  page.out() << "<h2 id=\"training\">Training</h2>\n<div class=\"charts\">\n";
  page.chart("train-loss-step", "Train loss by step", kStep, loss, columns(train, "step", "train_loss"), {false, true});
  page.chart("train-loss-time", "Train loss by simulated time", kSimTime, loss,
             columns(train, "sim_time_s", "train_loss"), {true, true});
  page.chart("train-loss-bytes", "Train loss by bytes sent", kBytes, loss, columns(train, "bytes_sent", "train_loss"),
             {true, true});
  page.chart("lr-step", "Learning rate", kStep, {"learning rate"}, columns(train, "step", "lr"));
  // Runs that simulate failures only (a chart without series is left out).
  page.chart("live-nodes-step", "Live nodes by step", kStep, {"live nodes"}, columns(train, "step", "live_nodes"));
  page.out() << "</div>\n";
}

void validation_charts(Page& page, const std::vector<FinishedRun>& runs) {
  const auto val = &FinishedRun::validation;
  page.out() << "<h2 id=\"validation\">Validation</h2>\n<p class=\"meta\">Global: the parameter-averaged model; "
             << "local: node 0's model, on the same validation batches.</p>\n<div class=\"charts\">\n";
  const Axis global{"global validation loss"};
  page.chart("val-global-step", "Global validation loss by step", kStep, global, columns(val, "step", "global_loss"));
  page.chart("val-global-time", "Global validation loss by simulated time", kSimTime, global,
             columns(val, "sim_time_s", "global_loss"), {true, false});
  page.chart("val-global-bytes", "Global validation loss by bytes sent", kBytes, global,
             columns(val, "bytes_sent", "global_loss"), {true, false});
  page.chart("val-local-step", "Local validation loss by step", kStep, {"local validation loss"},
             columns(val, "step", "local_loss"));
  for (const auto& m : model_metric_names(runs)) {
    page.chart("val-global-" + m + "-step", "Global validation " + m + " by step", kStep, {"global " + m},
               columns(val, "step", "global_" + m));
  }
  page.out() << "</div>\n";
}

void strategy_metric_charts(Page& page, const std::vector<FinishedRun>& runs) {
  std::vector<std::string> names;
  for (const auto& run : runs) {
    for (const auto& entry : run.metrics) {
      if (std::find(names.begin(), names.end(), entry.first) == names.end()) names.push_back(entry.first);
    }
  }
  if (names.empty()) return;
  page.out() << "<h2 id=\"strategy-metrics\">Strategy metrics</h2>\n<p class=\"meta\">What the strategies recorded "
             << "(metrics.csv), the mean over the nodes that recorded it at each step.</p>\n<div class=\"charts\">\n";
  for (const auto& name : names) {
    page.chart("metric-" + name, name, kStep, {name}, [name](const FinishedRun& run, Series& series) {
      const auto it = run.metrics.find(name);
      if (it == run.metrics.end()) return false;
      series.x = it->second.step;
      series.y = it->second.value;
      series.spread = it->second.spread;
      return true;
    });
  }
  page.out() << "</div>\n";
}

}  // namespace

std::string series_colour(size_t i) {
  // Tableau 10: distinct on screen and in grey print, for colour-blind readers too.
  static const char* palette[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1",
                                  "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#17becf"};
  return palette[i % (sizeof palette / sizeof *palette)];
}

std::string report_html(const std::string& title, const std::vector<FinishedRun>& runs,
                        const std::vector<std::string>& notes) {
  Page page(runs);
  auto& out = page.out();
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << escape_html(title)
      << "</title>\n<style>" << kStyle << view_style() << "</style>\n</head>\n<body>\n<h1>" << escape_html(title)
      << "</h1>\n<p class=\"meta\">" << runs.size() << (runs.size() == 1 ? " run" : " runs") << ", reported by ExoGym "
      << EXOGYM_VERSION << ".</p>\n";
  if (std::any_of(runs.begin(), runs.end(), [](const FinishedRun& r) { return !r.seeds.empty(); })) {
    out << "<p class=\"meta\" id=\"seeds\">A run over several seeds is drawn as its mean over the seeds, with a band "
        << "of ±1 sample standard deviation; its numbers read mean ± standard deviation.</p>\n";
  }
  if (!notes.empty()) {
    out << "<div class=\"notes\"><ul>\n";
    for (const auto& note : notes) out << "<li>" << escape_html(note) << "</li>\n";
    out << "</ul></div>\n";
  }
  out << "<h2 id=\"summary\">Summary</h2>\n<div class=\"table-wrap\">\n"
      << summary_table_html(runs, page.colours()) << "</div>\n"
      << controls_html();
  training_charts(page);
  validation_charts(page, runs);
  strategy_metric_charts(page, runs);
  out << "<h2 id=\"time\">Simulated time per node</h2>\n" << time_split_svg(runs);
  out << "<h2 id=\"config\">Configuration</h2>\n";
  for (const auto& run : runs) {
    out << "<details" << (runs.size() == 1 ? " open" : "") << "><summary>" << escape_html(run.label) << " — "
        << escape_html(run.dir.string()) << "</summary>\n<pre>" << escape_html(run.config.dump(2))
        << "</pre></details>\n";
  }
  out << "</body>\n</html>\n";
  return out.str();
}

}  // namespace exogym::runtime::output::report
