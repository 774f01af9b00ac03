#include "sim/report_html.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/inflate_command.h"
#include "sim/replay_command.h"

namespace arbiter::sim::report {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text of each <section>...</section> of a page, in order.
std::vector<std::string> Sections(const std::string& html) {
  std::vector<std::string> out;
  for (size_t at = html.find("<section"); at != std::string::npos;
       at = html.find("<section", at + 1)) {
    const size_t end = html.find("</section>", at);
    out.push_back(html.substr(at, end == std::string::npos ? std::string::npos : end - at));
  }
  return out;
}

TEST(NiceTicks, RoundStepsCoveringTheRange) {
  EXPECT_EQ(NiceTicks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(NiceTicks(0, 130, 10), (std::vector<double>{0, 20, 40, 60, 80, 100, 120, 140}));
  const std::vector<double> t = NiceTicks(0.013, 0.042, 4);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 0.013);
  EXPECT_GE(t.back(), 0.042);
  EXPECT_NEAR(t[1] - t[0], 0.01, 1e-12);
  EXPECT_EQ(NiceTicks(5, 5).size(), 1u);  // degenerate: no loop, no crash
}

TEST(EscapeHtml, EscapesMarkupAndQuotes) {
  EXPECT_EQ(EscapeHtml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
}

TEST(Box, QuantilesInterpolateBetweenOrderStatistics) {
  const Box b = Box::FromSamples("x", {4, 1, 3, 2, 5});
  EXPECT_EQ(b.count, 5u);
  EXPECT_DOUBLE_EQ(b.min, 1);
  EXPECT_DOUBLE_EQ(b.q1, 2);
  EXPECT_DOUBLE_EQ(b.median, 3);
  EXPECT_DOUBLE_EQ(b.q3, 4);
  EXPECT_DOUBLE_EQ(b.max, 5);
  EXPECT_DOUBLE_EQ(b.mean, 3);
  const Box c = Box::FromSamples("y", {1, 2});
  EXPECT_DOUBLE_EQ(c.median, 1.5);
  EXPECT_DOUBLE_EQ(c.q1, 1.25);
  EXPECT_EQ(Box::FromSamples("z", {}).count, 0u);
}

TEST(RenderChart, EveryKindIsOneSvgWithItsLabels) {
  LineChart line;
  line.title = "Allocation";
  line.x_label = "demand (%)";
  line.y_label = "allocated (%)";
  line.series = {{"fgd", {{0, 0}, {50, 49}, {100, 95}}}, {"a<b", {{0, 0}, {100, 90}}}};
  BarChart bars;
  bars.title = "Shares";
  bars.categories = {"team-a", "team-b"};
  bars.series = {{"used", {3, 4}}, {"guaranteed", {2, 5}}};
  bars.stacked = true;
  BoxChart boxes;
  boxes.title = "Wait";
  boxes.log_y = true;
  boxes.boxes = {Box::FromSamples("q1", {1, 10, 100}), Box::FromSamples("q2", {})};
  for (const Chart& c : std::vector<Chart>{line, bars, boxes}) {
    const std::string svg = RenderChart(c);
    EXPECT_EQ(Count(svg, "<svg"), 1u);
    EXPECT_EQ(Count(svg, "</svg>"), 1u);
  }
  const std::string svg = RenderChart(line);
  EXPECT_NE(svg.find("demand (%)"), std::string::npos);
  EXPECT_NE(svg.find("allocated (%)"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);  // the legend, escaped
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_EQ(Count(svg, "<path"), 2u);  // one line per series
}

TEST(RenderChart, RotatedCategoryLabelsGetRoomAboveTheAxisLabel) {
  BarChart bars;
  bars.x_label = "queue";
  bars.categories = {"a", "b"};
  bars.series = {{"s", {1, 2}}};
  const std::string short_labels = RenderChart(bars);
  EXPECT_EQ(short_labels.find("rotate(-30"), std::string::npos);
  EXPECT_NE(short_labels.find("viewBox=\"0 0 760 366\""), std::string::npos) << short_labels;
  for (int i = 0; i < 12; ++i) bars.categories.push_back(fmt::format("tenant-{}-online", i));
  const std::string long_labels = RenderChart(bars);
  EXPECT_NE(long_labels.find("rotate(-30"), std::string::npos);
  // 16 characters: 16 + 0.5 x 6.6 x 16 + 30 = 98.8 under the plot instead of 52.
  EXPECT_NE(long_labels.find("viewBox=\"0 0 760 412.8\""), std::string::npos) << long_labels;
}

TEST(RenderChart, NonFiniteValuesAreLeftOut) {
  LineChart line;
  line.series = {{"s", {{0, 1}, {1, std::nan("")}, {2, 3}}}};
  const std::string svg = RenderChart(line);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(Count(svg, "<circle"), 2u);
}

TEST(RenderHtml, SectionsInOrderWithTablesAndUniqueClipIds) {
  Report r;
  r.title = "T & T";
  Section& a = r.sections.emplace_back();
  a.title = "Lines";
  LineChart l1;
  l1.series = {{"s", {{0, 1}, {1, 2}}}};
  a.charts.emplace_back(l1);
  Section& b = r.sections.emplace_back();
  b.title = "Numbers";
  b.tables.push_back({"caption", {"name", "value"}, {{"x", "1.5"}, {"y", "12 %"}}});
  Section& c = r.sections.emplace_back();
  c.title = "More lines";
  c.charts.emplace_back(l1);
  const std::string html = RenderHtml(r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<title>T &amp; T</title>"), std::string::npos);
  const std::vector<std::string> sections = Sections(html);
  ASSERT_EQ(sections.size(), 3u);
  EXPECT_EQ(Count(sections[0], "<svg"), 1u);
  EXPECT_EQ(Count(sections[1], "<svg"), 0u);
  EXPECT_EQ(Count(sections[1], "<td class=\"num\">"), 2u);
  EXPECT_EQ(Count(html, "id=\"clip1\""), 1u);
  EXPECT_EQ(Count(html, "id=\"clip2\""), 1u);
  // Nothing is fetched from elsewhere.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
}

// --- The reports in a real headless browser ---------------------------------------------------

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

// $ARBITER_CHROMIUM when set, else Debian's /usr/bin/chromium (or chromium-browser); "" when the
// browser is not there.
std::string Chromium() {
  std::vector<std::string> candidates = {"/usr/bin/chromium", "/usr/bin/chromium-browser"};
  if (const char* env = std::getenv("ARBITER_CHROMIUM"); env != nullptr && *env != '\0') {
    candidates = {env};
  }
  for (const std::string& p : candidates) {
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs chromium headless on `url` with `mode` (--dump-dom or --screenshot=...); stdout to `out`,
// stderr to `err`. Returns the exit status.
int RunChromium(const std::string& chromium, const std::string& mode, const std::string& url,
                const std::filesystem::path& dir, const std::filesystem::path& out,
                const std::filesystem::path& err) {
  const std::string cmd = fmt::format(
      "timeout 120 '{}' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--disable-dev-shm-usage --hide-scrollbars --window-size=1100,3000 --user-data-dir='{}' "
      "--enable-logging=stderr --v=0 {} '{}' > '{}' 2> '{}'",
      chromium, (dir / "profile").string(), mode, url, out.string(), err.string());
  return std::system(cmd.c_str());
}

// The skip message of the browser tests, when no chromium is there.
constexpr const char* kNoChromium =
    "SKIPPED: chromium is not installed (Debian: apt-get install chromium, or set "
    "ARBITER_CHROMIUM to the browser): the browser test of the HTML report did not run";

// A fresh temporary folder for one browser test.
std::filesystem::path BrowserTestDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("arbiter_html_test_{}_{}", name, ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Loads `html_path` in headless chromium: the page's own script ran to the end, nothing raised an
// error or failed to load. `dom` gets the page as the browser built it.
void ExpectLoadsCleanly(const std::string& chromium, const std::string& html_path,
                        const std::filesystem::path& dir, std::string* dom) {
  ASSERT_FALSE(ReadFile(html_path).empty());
  const std::string url = fmt::format("file://{}", html_path);
  ASSERT_EQ(RunChromium(chromium, "--dump-dom", url, dir, dir / "dom.html", dir / "stderr.txt"), 0)
      << ReadFile(dir / "stderr.txt");
  *dom = ReadFile(dir / "dom.html");
  const std::string log = ReadFile(dir / "stderr.txt");
  EXPECT_NE(dom->find("data-report-ready=\"1\""), std::string::npos) << dom->substr(0, 2000);
  EXPECT_EQ(dom->find("data-report-error=\""), std::string::npos) << dom->substr(0, 2000);
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  EXPECT_EQ(log.find("Failed to load resource"), std::string::npos) << log;
}

// A screenshot renders (kept in the temp folder when ARBITER_KEEP_REPORT is set).
void ExpectScreenshotAndCleanUp(const std::string& chromium, const std::string& html_path,
                                const std::filesystem::path& dir) {
  const std::string url = fmt::format("file://{}", html_path);
  ASSERT_EQ(RunChromium(chromium, fmt::format("--screenshot={}", (dir / "report.png").string()),
                        url, dir, dir / "shot.txt", dir / "shot_err.txt"),
            0)
      << ReadFile(dir / "shot_err.txt");
  EXPECT_GT(std::filesystem::file_size(dir / "report.png"), 10000u);
  if (std::getenv("ARBITER_KEEP_REPORT") == nullptr) {
    std::filesystem::remove_all(dir);
  } else {
    std::printf("report kept in %s\n", dir.string().c_str());
  }
}

TEST(InflateHtml, LoadsInHeadlessChromiumWithoutErrorsAndOneChartPerChartSection) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << kNoChromium;
  const auto dir = BrowserTestDir("inflate");
  InflateOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"fgd", "bestfit", "default"};
  o.seeds = "42-43";
  o.target = 1.3;
  o.json_path = (dir / "report.json").string();
  o.html_path = (dir / "report.html").string();
  ASSERT_EQ(RunInflateCommand(o), 0);
  std::string dom;
  ASSERT_NO_FATAL_FAILURE(ExpectLoadsCleanly(chromium, o.html_path, dir, &dom));

  // Summary (table), allocation, allocation near saturation, fragmentation, per-seed spread
  // (charts), runs (table): exactly one <svg> in each chart section, none elsewhere.
  const std::vector<std::string> sections = Sections(dom);
  ASSERT_EQ(sections.size(), 6u) << dom.substr(0, 2000);
  const std::array<size_t, 6> charts = {0, 1, 1, 1, 1, 0};
  for (size_t i = 0; i < sections.size(); ++i) {
    EXPECT_EQ(Count(sections[i], "<svg"), charts[i]) << "section " << i + 1;
  }
  EXPECT_NE(sections[1].find("GPU demand (% of the cluster"), std::string::npos);
  // Every policy is in the legend of the allocation chart.
  for (const std::string& p : o.policies) {
    EXPECT_NE(sections[1].find(fmt::format(">{}</text>", p)), std::string::npos) << p;
  }
  ExpectScreenshotAndCleanUp(chromium, o.html_path, dir);
}

TEST(ReplayHtml, LoadsInHeadlessChromiumWithoutErrorsAndOneChartPerChartSection) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << kNoChromium;
  const auto dir = BrowserTestDir("replay");
  ReplayCommandOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"default", "fgd", "bestfit"};
  o.convert.time_scale = 0.0001;
  o.json_path = (dir / "report.json").string();
  o.html_path = (dir / "report.html").string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  std::string dom;
  ASSERT_NO_FATAL_FAILURE(ExpectLoadsCleanly(chromium, o.html_path, dir, &dom));

  // Summary (table), allocation over time and while jobs arrive, waits, waits by queue, by type,
  // shares, shares while waiting (one chart each), dropped and unfinished jobs (text or a table).
  const std::vector<std::string> sections = Sections(dom);
  ASSERT_EQ(sections.size(), 9u) << dom.substr(0, 2000);
  const std::array<size_t, 9> charts = {0, 1, 1, 1, 1, 1, 1, 1, 0};
  for (size_t i = 0; i < sections.size(); ++i) {
    EXPECT_EQ(Count(sections[i], "<svg"), charts[i]) << "section " << i + 1;
  }
  EXPECT_NE(sections[1].find("simulated time since the first submit"), std::string::npos);
  // Every policy is in the legend of every chart but the per-policy summary table's section.
  for (size_t i = 1; i < 8; ++i) {
    for (const std::string& p : o.policies) {
      EXPECT_NE(sections[i].find(fmt::format(">{}</text>", p)), std::string::npos)
          << "section " << i + 1 << ": " << p;
    }
  }
  EXPECT_NE(sections[6].find(">guaranteed</text>"), std::string::npos);
  ExpectScreenshotAndCleanUp(chromium, o.html_path, dir);
}

}  // namespace
}  // namespace arbiter::sim::report
