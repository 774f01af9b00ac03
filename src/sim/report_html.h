// A self-contained HTML report: one file, no network access, charts drawn as inline SVG here.
//
// The model is generic so that every simulator mode writes its report the same way: a Report is a
// list of Sections; each Section has a title, paragraphs of text, charts and tables, rendered in
// that order. Charts are line charts of named (x, y) series, grouped or stacked bar charts over
// categories, and box plots of distributions. The writer knows nothing about placement or traces:
// a mode fills the model, RenderHtml() turns it into a page.
//
//   report::Report r;
//   r.title = "Workload inflation";
//   report::Section& s = r.sections.emplace_back();
//   s.title = "GPU allocation";
//   report::LineChart c;
//   c.x_label = "GPU demand (% of capacity)";
//   c.y_label = "GPUs allocated (%)";
//   c.series.push_back({"fgd", {{0, 0}, {100, 95.1}}});
//   s.charts.emplace_back(std::move(c));
//   WriteHtml(r, "out.html");
//
// The page is plain HTML5 with inline CSS and one small inline script that only records load
// errors (on <html>, attribute data-report-error) and marks a complete load (attribute
// data-report-ready="1" on <body>), so that a headless browser test can check it. Every chart is
// exactly one <svg class="chart"> element (its legend included); each data point carries a <title>
// tooltip. All text is HTML-escaped; non-finite values are left out of charts.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace arbiter::sim::report {

// One named line: points in the order given (usually ascending x).
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  // Axis ranges; when unset (min > max), from the data (y widened to round ticks). y starts at
  // 0 when every value is positive and y_from_zero is set.
  double x_min = 1, x_max = 0;
  double y_min = 1, y_max = 0;
  bool y_from_zero = false;
  // Draw each series as steps (value held until the next point), e.g. for counts over time.
  bool step = false;
};

// Bars over categories: one bar per (category, series), side by side or stacked.
struct BarChart {
  std::string title;
  std::string x_label;  // what the categories are
  std::string y_label;
  std::vector<std::string> categories;
  struct BarSeries {
    std::string name;
    std::vector<double> values;  // one per category (missing ones count as 0)
  };
  std::vector<BarSeries> series;
  bool stacked = false;
};

// A box per distribution: whiskers at min and max, box from q1 to q3, a line at the median, a dot
// at the mean. Make one from raw samples with Box::FromSamples.
struct Box {
  std::string label;
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0, mean = 0;
  size_t count = 0;
  // Quantiles by linear interpolation between order statistics (type 7, as R and NumPy default).
  static Box FromSamples(std::string label, std::vector<double> samples);
};

struct BoxChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Box> boxes;
  bool log_y = false;        // logarithmic value axis (values <= 0 are drawn at the axis' bottom)
  bool y_from_zero = false;  // linear axis from 0 when every value is positive
};

using Chart = std::variant<LineChart, BarChart, BoxChart>;

struct Table {
  std::string caption;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // cells as text; numbers right-aligned
};

struct Section {
  std::string title;
  std::vector<std::string> paragraphs;
  std::vector<Chart> charts;
  std::vector<Table> tables;
};

struct Report {
  std::string title;
  std::string subtitle;            // e.g. the command line that made it
  std::vector<std::string> notes;  // paragraphs under the title
  std::vector<Section> sections;
};

// The SVG element of one chart (for tests and for embedding).
std::string RenderChart(const Chart& chart);
// The whole page.
std::string RenderHtml(const Report& report);
// Renders and writes the page; the error names the path.
Status WriteHtml(const Report& report, const std::string& path);

// Round tick positions covering [lo, hi] (about `target` of them, steps of 1, 2 or 5 x 10^k).
std::vector<double> NiceTicks(double lo, double hi, int target = 6);
// "&", "<", ">", '"' and "'" escaped.
std::string EscapeHtml(std::string_view text);

}  // namespace arbiter::sim::report
