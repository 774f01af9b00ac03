#include "sim/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>
#include <variant>

#include "sim/text.h"

namespace arbiter::sim::report {

namespace {

// Ten colours that stay apart on screen and in print (Tableau 10).
constexpr std::string_view kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
std::string_view Colour(size_t i) { return kPalette[i % std::size(kPalette)]; }
// Series past the palette's length get dashes, so that no two look the same.
std::string_view Dash(size_t i) {
  constexpr std::string_view kDashes[] = {"", "6 3", "2 3", "8 3 2 3"};
  return kDashes[(i / std::size(kPalette)) % std::size(kDashes)];
}

// Chart geometry, in SVG user units (the SVG scales to the page's width).
constexpr double kWidth = 760;
constexpr double kPlotHeight = 280;
constexpr double kLeft = 70;
constexpr double kRight = 20;
constexpr double kTop = 34;
constexpr double kAxisBelow = 52;  // tick labels and the x label under the plot
constexpr double kLegendRow = 20;
constexpr double kCharWidth = 6.6;  // estimated width of one character at 12px

// Shortest text for a number at the resolution of `step` (ticks), or at 4 significant digits.
std::string FormatNumber(double v, double step = 0) {
  if (!std::isfinite(v)) return "-";
  if (std::abs(v) < 1e-12) return "0";
  if (std::abs(v) >= 1e6 || (step == 0 && std::abs(v) < 1e-3)) return fmt::format("{:.3g}", v);
  int decimals = 0;
  if (step > 0) {
    decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  } else {
    decimals = std::clamp(3 - static_cast<int>(std::floor(std::log10(std::abs(v)))), 0, 6);
  }
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (step == 0 && s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

struct Scale {
  double lo = 0, hi = 1;  // data range shown
  double p0 = 0, p1 = 1;  // pixel range (p0 for lo)
  bool log = false;
  double operator()(double v) const {
    if (log) {
      const double l = std::log10(std::max(v, lo));
      return p0 + (l - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (p1 - p0);
    }
    return p0 + (v - lo) / (hi - lo) * (p1 - p0);
  }
};

// Round ticks for [lo, hi]; with `widen`, the range grows to the outer ticks. A degenerate range
// gets some room.
std::vector<double> FitLinear(double* lo, double* hi, bool widen, int target = 6) {
  if (!(*lo < *hi)) {
    const double pad = std::abs(*lo) > 0 ? std::abs(*lo) * 0.1 : 1.0;
    *lo -= pad;
    *hi += pad;
  }
  std::vector<double> ticks = NiceTicks(*lo, *hi, target);
  if (widen) {
    *lo = std::min(*lo, ticks.front());
    *hi = std::max(*hi, ticks.back());
  }
  return ticks;
}

std::vector<double> LogTicks(double* lo, double* hi) {
  *lo = std::pow(10.0, std::floor(std::log10(*lo)));
  *hi = std::pow(10.0, std::ceil(std::log10(*hi)));
  if (*hi <= *lo) *hi = *lo * 10;
  std::vector<double> ticks;
  const bool dense = *hi / *lo <= 1000;
  for (double d = *lo; d <= *hi * 1.0001; d *= 10) {
    ticks.push_back(d);
    if (dense && d * 10 <= *hi * 1.0001) {
      ticks.push_back(2 * d);
      ticks.push_back(5 * d);
    }
  }
  return ticks;
}

std::string Attr(std::string_view s) { return EscapeHtml(s); }

// Room under the plot for category labels rotated by 30 degrees (their height is half their
// length), then the x label.
double RotatedAxisBelow(size_t longest_label) {
  return std::max(kAxisBelow, 16 + 0.5 * kCharWidth * static_cast<double>(longest_label) + 30);
}

// The frame shared by all charts: an <svg> with title, grid, y axis and labels. The caller adds
// the plot and the x axis; Close() adds the legend and the closing tag.
class Canvas {
 public:
  // `axis_below`: room under the plot for the tick labels and the x label (more for rotated
  // category labels).
  Canvas(std::string_view title, std::vector<std::string> legend, bool legend_as_boxes,
         double axis_below = kAxisBelow)
      : title_(title), legend_(std::move(legend)), boxes_(legend_as_boxes), below_(axis_below) {
    // Lay the legend out in rows first: the SVG's height depends on it.
    double x = kLeft;
    int rows = legend_.empty() ? 0 : 1;
    for (const std::string& name : legend_) {
      const double w = 30 + kCharWidth * static_cast<double>(name.size()) + 14;
      if (x + w > kWidth - kRight && x > kLeft) {
        ++rows;
        x = kLeft;
      }
      legend_pos_.push_back({x, rows});
      x += w;
    }
    height_ = kTop + kPlotHeight + below_ + kLegendRow * rows + (rows > 0 ? 6 : 0);
    out_ = fmt::format(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
        "role=\"img\" aria-label=\"{}\">\n",
        kWidth, height_, Attr(title));
    out_ += fmt::format("<text class=\"ctitle\" x=\"{}\" y=\"20\">{}</text>\n", kLeft,
                        EscapeHtml(title));
  }
  double plot_left() const { return kLeft; }
  double plot_right() const { return kWidth - kRight; }
  double plot_top() const { return kTop; }
  double plot_bottom() const { return kTop + kPlotHeight; }
  std::string& out() { return out_; }

  void YAxis(const Scale& y, const std::vector<double>& ticks, std::string_view label) {
    double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 0;
    for (double t : ticks) {
      if (t < y.lo - 1e-9 || t > y.hi + 1e-9) continue;
      const double py = y(t);
      out_ += fmt::format(
          "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
          plot_left(), plot_right(), py, py, plot_left() - 6, py + 4,
          FormatNumber(t, y.log ? t : step));
    }
    const double cy = (plot_top() + plot_bottom()) / 2;
    out_ += fmt::format(
        "<text class=\"alabel\" x=\"16\" y=\"{:.1f}\" text-anchor=\"middle\" "
        "transform=\"rotate(-90 16 {:.1f})\">{}</text>\n",
        cy, cy, EscapeHtml(label));
  }

  void XTicks(const Scale& x, const std::vector<double>& ticks) {
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 0;
    for (double t : ticks) {
      if (t < x.lo - 1e-9 || t > x.hi + 1e-9) continue;
      const double px = x(t);
      out_ += fmt::format(
          "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
          px, px, plot_top(), plot_bottom(), px, plot_bottom() + 16, FormatNumber(t, step));
    }
  }

  void XLabel(std::string_view label) {
    out_ += fmt::format(
        "<text class=\"alabel\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
        (plot_left() + plot_right()) / 2, plot_bottom() + below_ - 12, EscapeHtml(label));
  }

  std::string Close() {
    out_ += fmt::format(
        "<rect class=\"frame\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>\n",
        plot_left(), plot_top(), plot_right() - plot_left(), plot_bottom() - plot_top());
    for (size_t i = 0; i < legend_.size(); ++i) {
      const double x = legend_pos_[i].first;
      const double y = plot_bottom() + below_ + kLegendRow * (legend_pos_[i].second - 1) + 10;
      out_ += "<g class=\"legend\">";
      if (boxes_) {
        out_ +=
            fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"22\" height=\"10\" fill=\"{}\"/>",
                        x, y - 5, Colour(i));
      } else {
        out_ += fmt::format(
            "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
            "stroke-width=\"2.5\" stroke-dasharray=\"{}\"/>",
            x, x + 22, y, y, Colour(i), Dash(i));
      }
      out_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text></g>\n", x + 28, y + 4,
                          EscapeHtml(legend_[i]));
    }
    out_ += "</svg>\n";
    return std::move(out_);
  }

 private:
  std::string title_;
  std::vector<std::string> legend_;
  bool boxes_;
  double below_;
  std::vector<std::pair<double, int>> legend_pos_;
  double height_ = 0;
  std::string out_;
};

std::string RenderLine(const LineChart& c, std::string_view clip_id) {
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo;
  double ylo = xlo, yhi = -xlo;
  for (const Series& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xlo = std::min(xlo, x);
      xhi = std::max(xhi, x);
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
    }
  }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  const bool fixed_y = c.y_min <= c.y_max;
  if (c.x_min <= c.x_max) xlo = c.x_min, xhi = c.x_max;
  if (fixed_y) {
    ylo = c.y_min, yhi = c.y_max;
  } else if (c.y_from_zero && ylo > 0) {
    ylo = 0;
  }
  std::vector<std::string> names;
  for (const Series& s : c.series) names.push_back(s.name);
  Canvas cv(c.title, names, false);
  std::vector<double> xt = FitLinear(&xlo, &xhi, false, 10);
  std::vector<double> yt = FitLinear(&ylo, &yhi, !fixed_y);
  const Scale x{xlo, xhi, cv.plot_left(), cv.plot_right()};
  const Scale y{ylo, yhi, cv.plot_bottom(), cv.plot_top()};
  cv.YAxis(y, yt, c.y_label);
  cv.XTicks(x, xt);
  cv.XLabel(c.x_label);
  std::string& o = cv.out();
  o += fmt::format(
      "<clipPath id=\"{}\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
      "height=\"{:.1f}\"/></clipPath>\n",
      clip_id, cv.plot_left(), cv.plot_top() - 2, cv.plot_right() - cv.plot_left(),
      cv.plot_bottom() - cv.plot_top() + 4);
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    std::string path;
    bool first = true;
    size_t shown = 0;
    for (const auto& [vx, vy] : s.points) {
      if (!std::isfinite(vx) || !std::isfinite(vy)) continue;
      const double px = x(vx), py = y(vy);
      if (first) {
        path += fmt::format("M{:.2f},{:.2f}", px, py);
      } else if (c.step) {
        path += fmt::format("H{:.2f}V{:.2f}", px, py);
      } else {
        path += fmt::format("L{:.2f},{:.2f}", px, py);
      }
      first = false;
      ++shown;
    }
    o += fmt::format(
        "<g class=\"series\"><path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
        "stroke-opacity=\"0.85\" "
        "stroke-dasharray=\"{}\" clip-path=\"url(#{})\"><title>{}</title></path>",
        path, Colour(i), Dash(i), clip_id, EscapeHtml(s.name));
    // A hover target with a tooltip per point; visible dots only when there are few points.
    const bool dots = shown <= 40;
    for (const auto& [vx, vy] : s.points) {
      if (!std::isfinite(vx) || !std::isfinite(vy)) continue;
      o += fmt::format(
          "<circle class=\"{}\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{}\" fill=\"{}\"><title>{}: "
          "{} = {}, {} = {}</title></circle>",
          dots ? "dot" : "hover", x(vx), y(vy), dots ? 3 : 4, Colour(i), EscapeHtml(s.name),
          EscapeHtml(c.x_label), FormatNumber(vx), EscapeHtml(c.y_label), FormatNumber(vy));
    }
    o += "</g>\n";
  }
  return cv.Close();
}

std::string RenderBars(const BarChart& c) {
  const size_t nc = c.categories.size();
  double yhi = 0, ylo = 0;
  for (size_t k = 0; k < nc; ++k) {
    double pos = 0, neg = 0;
    for (const auto& s : c.series) {
      const double v = k < s.values.size() && std::isfinite(s.values[k]) ? s.values[k] : 0;
      if (c.stacked) {
        (v >= 0 ? pos : neg) += v;
      } else {
        pos = std::max(pos, v);
        neg = std::min(neg, v);
      }
    }
    yhi = std::max(yhi, pos);
    ylo = std::min(ylo, neg);
  }
  if (yhi == 0 && ylo == 0) yhi = 1;  // all zero: an axis from 0, not around it
  std::vector<std::string> names;
  for (const auto& s : c.series) names.push_back(s.name);
  const double band = (kWidth - kRight - kLeft) / static_cast<double>(std::max<size_t>(1, nc));
  size_t longest = 0;
  for (const std::string& cat : c.categories) longest = std::max(longest, cat.size());
  const bool rotate = kCharWidth * static_cast<double>(longest) > band;
  Canvas cv(c.title, c.series.size() > 1 ? names : std::vector<std::string>{}, true,
            rotate ? RotatedAxisBelow(longest) : kAxisBelow);
  std::vector<double> yt = FitLinear(&ylo, &yhi, true);
  const Scale y{ylo, yhi, cv.plot_bottom(), cv.plot_top()};
  cv.YAxis(y, yt, c.y_label);
  cv.XLabel(c.x_label);
  std::string& o = cv.out();
  const double inner = band * 0.8;
  const size_t ns = std::max<size_t>(1, c.series.size());
  for (size_t k = 0; k < nc; ++k) {
    const double x0 = cv.plot_left() + band * static_cast<double>(k) + (band - inner) / 2;
    double pos = 0, neg = 0;
    for (size_t i = 0; i < c.series.size(); ++i) {
      const auto& s = c.series[i];
      const double v = k < s.values.size() && std::isfinite(s.values[k]) ? s.values[k] : 0;
      double a = 0, b = v, bx = x0, bw = inner;
      if (c.stacked) {
        double& base = v >= 0 ? pos : neg;
        a = base;
        b = base + v;
        base = b;
      } else {
        bw = inner / static_cast<double>(ns);
        bx = x0 + bw * static_cast<double>(i);
      }
      const double top = y(std::max(a, b)), bottom = y(std::min(a, b));
      o += fmt::format(
          "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
          "fill=\"{}\"><title>{}{}{}: {}</title></rect>",
          bx, top, std::max(0.5, bw - 1), std::max(0.0, bottom - top), Colour(i),
          EscapeHtml(c.categories[k]), c.series.size() > 1 ? ", " : "",
          c.series.size() > 1 ? EscapeHtml(s.name) : "", FormatNumber(v));
    }
    const double cx = cv.plot_left() + band * (static_cast<double>(k) + 0.5);
    const double ty = cv.plot_bottom() + 16;
    if (rotate) {
      o += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" "
          "transform=\"rotate(-30 {:.1f} {:.1f})\">{}</text>\n",
          cx, ty, cx, ty, EscapeHtml(c.categories[k]));
    } else {
      o += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" "
          "text-anchor=\"middle\">{}</text>\n",
          cx, ty, EscapeHtml(c.categories[k]));
    }
  }
  return cv.Close();
}

std::string RenderBoxes(const BoxChart& c) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Box& b : c.boxes) {
    if (b.count == 0) continue;
    for (double v : {b.min, b.max, b.mean}) {
      if (!std::isfinite(v) || (c.log_y && v <= 0)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = c.log_y ? 1 : 0, hi = c.log_y ? 10 : 1;
  if (!c.log_y && c.y_from_zero && lo > 0) lo = 0;
  const size_t n = std::max<size_t>(1, c.boxes.size());
  const double band = (kWidth - kRight - kLeft) / static_cast<double>(n);
  size_t longest = 0;
  for (const Box& b : c.boxes) longest = std::max(longest, b.label.size());
  const bool rotate = kCharWidth * static_cast<double>(longest) > band;
  Canvas cv(c.title, {}, true, rotate ? RotatedAxisBelow(longest) : kAxisBelow);
  std::vector<double> yt = c.log_y ? LogTicks(&lo, &hi) : FitLinear(&lo, &hi, true);
  const Scale y{lo, hi, cv.plot_bottom(), cv.plot_top(), c.log_y};
  cv.YAxis(y, yt, c.y_label);
  cv.XLabel(c.x_label);
  std::string& o = cv.out();
  const double w = std::min(60.0, band * 0.5);
  for (size_t k = 0; k < c.boxes.size(); ++k) {
    const Box& b = c.boxes[k];
    const double cx = cv.plot_left() + band * (static_cast<double>(k) + 0.5);
    const std::string_view col = Colour(k);
    if (b.count > 0) {
      o += fmt::format(
          "<g class=\"box\"><title>{}: n = {}, min {}, q1 {}, median {}, q3 {}, max {}, mean "
          "{}</title>",
          EscapeHtml(b.label), b.count, FormatNumber(b.min), FormatNumber(b.q1),
          FormatNumber(b.median), FormatNumber(b.q3), FormatNumber(b.max), FormatNumber(b.mean));
      o += fmt::format(
          "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>"
          "<line x1=\"{4:.1f}\" x2=\"{5:.1f}\" y1=\"{1:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\"/>"
          "<line x1=\"{4:.1f}\" x2=\"{5:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>",
          cx, y(b.max), y(b.min), col, cx - w / 4, cx + w / 4);
      const double top = y(b.q3), bottom = y(b.q1);
      o += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
          "fill-opacity=\"0.25\" stroke=\"{}\"/>",
          cx - w / 2, top, w, std::max(1.0, bottom - top), col, col);
      o += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
          "stroke-width=\"2.5\"/><circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/></g>\n",
          cx - w / 2, cx + w / 2, y(b.median), y(b.median), col, cx, y(b.mean), col);
    }
    const double ty = cv.plot_bottom() + 16;
    if (rotate) {
      o += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" "
          "transform=\"rotate(-30 {:.1f} {:.1f})\">{}</text>\n",
          cx, ty, cx, ty, EscapeHtml(b.label));
    } else {
      o += fmt::format(
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", cx,
          ty, EscapeHtml(b.label));
    }
  }
  return cv.Close();
}

// A cell is numeric when it reads as a number, optionally signed, with a unit suffix like % or s.
bool LooksNumeric(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const size_t digits_from = i;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == ',')) ++i;
  if (i == digits_from) return s == "-";
  const std::string_view rest = s.substr(i);
  return rest.empty() || rest == "%" || rest == " s" || rest == "s" || rest == " %" ||
         rest == " GPUs" || rest == " h" || rest == " min";
}

constexpr std::string_view kStyle = R"css(
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif;
  margin: 0 auto; max-width: 1000px; padding: 24px 28px 48px; color: #1b1f24; background: #fff;
  line-height: 1.45; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 32px 0 8px; padding-top: 8px; border-top: 1px solid #d8dde3; }
.subtitle { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 0.85em;
  color: #4a5560; background: #f4f6f8; padding: 6px 8px; border-radius: 4px;
  overflow-wrap: anywhere; }
nav ol { margin: 8px 0; padding-left: 22px; } nav a { color: #0b5cad; }
figure { margin: 12px 0; }
svg.chart { width: 100%; height: auto; display: block; font-size: 12px; }
svg.chart .ctitle { font-size: 14px; font-weight: 600; fill: #1b1f24; }
svg.chart .tick { fill: #4a5560; font-size: 11px; }
svg.chart .alabel { fill: #1b1f24; font-size: 12px; }
svg.chart .grid { stroke: #e3e7eb; stroke-width: 1; }
svg.chart .frame { fill: none; stroke: #9aa4ae; stroke-width: 1; }
svg.chart .legend text { fill: #1b1f24; }
svg.chart circle.hover { opacity: 0; } svg.chart circle.hover:hover { opacity: 1; }
svg.chart .series path:hover { stroke-width: 3.5; }
table { border-collapse: collapse; margin: 12px 0; font-size: 0.9em; }
caption { text-align: left; font-weight: 600; padding-bottom: 4px; }
th, td { border: 1px solid #d8dde3; padding: 4px 10px; }
th { background: #f0f3f6; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #f8fafb; }
footer { margin-top: 40px; font-size: 0.8em; color: #6a757f; }
)css";

void AppendTable(const Table& t, std::string* o) {
  *o += "<table>";
  if (!t.caption.empty()) *o += fmt::format("<caption>{}</caption>", EscapeHtml(t.caption));
  *o += "<thead><tr>";
  for (const std::string& c : t.columns) *o += fmt::format("<th>{}</th>", EscapeHtml(c));
  *o += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    *o += "<tr>";
    for (const std::string& cell : row) {
      *o += fmt::format("<td{}>{}</td>", LooksNumeric(cell) ? " class=\"num\"" : "",
                        EscapeHtml(cell));
    }
    *o += "</tr>\n";
  }
  *o += "</tbody></table>\n";
}

}  // namespace

Box Box::FromSamples(std::string label, std::vector<double> samples) {
  Box b;
  b.label = std::move(label);
  samples.erase(
      std::remove_if(samples.begin(), samples.end(), [](double v) { return !std::isfinite(v); }),
      samples.end());
  b.count = samples.size();
  if (samples.empty()) return b;
  std::sort(samples.begin(), samples.end());
  // Type 7: h = (n - 1) p, interpolate between x[floor h] and x[floor h + 1].
  auto q = [&](double p) {
    const double h = static_cast<double>(samples.size() - 1) * p;
    const auto i = static_cast<size_t>(std::floor(h));
    const size_t j = std::min(i + 1, samples.size() - 1);
    return samples[i] + (h - static_cast<double>(i)) * (samples[j] - samples[i]);
  };
  b.min = samples.front();
  b.max = samples.back();
  b.q1 = q(0.25);
  b.median = q(0.5);
  b.q3 = q(0.75);
  double sum = 0;
  for (double v : samples) sum += v;
  b.mean = sum / static_cast<double>(samples.size());
  return b;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  // The smallest step of 1, 2 or 5 x 10^k that gives at most `target` intervals.
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw * (1 - 1e-9)) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step + 1e-9) * step;
  for (double t = first; t < hi + step - 1e-9 * step; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (ticks.size() > 100) break;
  }
  return ticks;
}

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
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
        out += ch;
    }
  }
  return out;
}

namespace {

std::string RenderChartWithId(const Chart& chart, std::string_view id) {
  return std::visit(
      [&](const auto& c) -> std::string {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, LineChart>) {
          return RenderLine(c, id);
        } else if constexpr (std::is_same_v<T, BarChart>) {
          return RenderBars(c);
        } else {
          return RenderBoxes(c);
        }
      },
      chart);
}

}  // namespace

std::string RenderChart(const Chart& chart) { return RenderChartWithId(chart, "clip"); }

std::string RenderHtml(const Report& r) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += fmt::format("<title>{}</title>\n", EscapeHtml(r.title));
  // Records any script error on <html> (the report itself needs no script to be read).
  o += "<script>window.addEventListener('error', function (e) {\n"
       "  document.documentElement.setAttribute('data-report-error', String(e.message || e));\n"
       "});</script>\n";
  o += fmt::format("<style>{}</style>\n</head>\n<body>\n", kStyle);
  o += fmt::format("<h1>{}</h1>\n", EscapeHtml(r.title));
  if (!r.subtitle.empty()) {
    o += fmt::format("<div class=\"subtitle\">{}</div>\n", EscapeHtml(r.subtitle));
  }
  for (const std::string& p : r.notes) o += fmt::format("<p>{}</p>\n", EscapeHtml(p));
  if (r.sections.size() > 1) {
    o += "<nav><ol>";
    for (size_t i = 0; i < r.sections.size(); ++i) {
      o += fmt::format("<li><a href=\"#s{}\">{}</a></li>", i + 1, EscapeHtml(r.sections[i].title));
    }
    o += "</ol></nav>\n";
  }
  size_t chart_no = 0;
  for (size_t i = 0; i < r.sections.size(); ++i) {
    const Section& s = r.sections[i];
    o += fmt::format("<section id=\"s{}\">\n<h2>{}</h2>\n", i + 1, EscapeHtml(s.title));
    for (const std::string& p : s.paragraphs) o += fmt::format("<p>{}</p>\n", EscapeHtml(p));
    for (const Chart& c : s.charts) {
      // Clip path ids must be unique in the document.
      const std::string svg = RenderChartWithId(c, fmt::format("clip{}", ++chart_no));
      o += fmt::format("<figure>\n{}</figure>\n", svg);
    }
    for (const Table& t : s.tables) AppendTable(t, &o);
    o += "</section>\n";
  }
  o += "<footer>Generated by Arbiter. Self-contained: no scripts, fonts or styles are loaded from "
       "elsewhere.</footer>\n";
  o += "<script>document.body.setAttribute('data-report-ready', '1');</script>\n";
  o += "</body>\n</html>\n";
  return o;
}

Status WriteHtml(const Report& report, const std::string& path) {
  return WriteTextFile(path, RenderHtml(report), "report");
}

}  // namespace arbiter::sim::report
