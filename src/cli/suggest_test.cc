// "Did you mean": the distance, what counts as near, and the messages of unknown commands and
// flags on a real CLI11 command tree.
#include "cli/suggest.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace arbiter::cli {
namespace {

TEST(EditDistance, CountsEditsAndTranspositions) {
  struct Case {
    const char* a;
    const char* b;
    size_t d;
  };
  for (const Case& c :
       {Case{"submit", "submit", 0}, Case{"sumbit", "submit", 1}, Case{"jbos", "jobs", 1},
        Case{"queu", "queue", 1}, Case{"", "abc", 3}, Case{"abc", "", 3},
        Case{"kitten", "sitting", 3}, Case{"SQUEUE", "squeue", 0}, Case{"ca", "abc", 3}}) {
    EXPECT_EQ(EditDistance(c.a, c.b), c.d) << c.a << " / " << c.b;
  }
}

TEST(Suggest, NearestCloseEnoughOrNone) {
  const std::vector<std::string> commands = {"submit", "suspend", "jobs",  "show",
                                             "squeue", "sinfo",   "sacct", "cancel"};
  EXPECT_EQ(Suggest("sumbit", commands), "submit");
  EXPECT_EQ(Suggest("jbos", commands), "jobs");
  EXPECT_EQ(Suggest("squeu", commands), "squeue");
  EXPECT_EQ(Suggest("sacc", commands), "sacct");
  EXPECT_EQ(Suggest("cancle", commands), "cancel");
  EXPECT_EQ(Suggest("xyzzy", commands), std::nullopt);
  EXPECT_EQ(Suggest("", commands), std::nullopt);
  // A prefix of exactly one candidate; of two, none.
  EXPECT_EQ(Suggest("subm", commands), "submit");
  EXPECT_EQ(Suggest("su", commands), std::nullopt);
  // Flags: compared without their dashes.
  const std::vector<std::string> flags = {"--queue", "--state", "--user", "--all"};
  EXPECT_EQ(Suggest("--queu", flags), "--queue");
  EXPECT_EQ(Suggest("-queue", flags), "--queue");
  EXPECT_EQ(Suggest("--stat", flags), "--state");
  EXPECT_EQ(Suggest("--verbose", flags), std::nullopt);
  EXPECT_EQ(DidYouMean("--usr", flags), "; did you mean \"--user\"?");
  EXPECT_EQ(DidYouMean("--nothing-like-it", flags), "");
}

// The message and exit code of a command line `app` refuses, with stderr captured.
std::pair<int, std::string> Parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("arbiter")};
  for (std::string& a : args) argv.push_back(a.data());
  std::fflush(stderr);
  ::testing::internal::CaptureStderr();
  int code = 0;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    code = ReportParseError(app, e);
  }
  return {code, ::testing::internal::GetCapturedStderr()};
}

TEST(ReportParseError, NamesTheNearestCommandOrFlag) {
  auto make = [] {
    auto app = std::make_unique<CLI::App>("test");
    app->require_subcommand(1);
    auto* jobs = app->add_subcommand("jobs", "List jobs");
    jobs->add_option("--queue", "Queue");
    jobs->add_flag("--all")->description("All");
    app->add_subcommand("submit", "Submit");
    return app;
  };
  {
    auto app = make();
    auto [code, err] = Parse(*app, {"sumbit"});
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err, "error: unknown command \"sumbit\"; did you mean \"submit\"?\n");
  }
  {
    auto app = make();
    auto [code, err] = Parse(*app, {"frobnicate"});
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err, "error: unknown command \"frobnicate\"; see arbiter --help\n");
  }
  {
    auto app = make();
    auto [code, err] = Parse(*app, {"jobs", "--queu", "q"});
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err,
              "error: unknown flag \"--queu\" for \"arbiter jobs\"; did you mean \"--queue\"?\n");
  }
  {
    auto app = make();
    auto [code, err] = Parse(*app, {"jobs", "--al=1"});
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err, "error: unknown flag \"--al\" for \"arbiter jobs\"; did you mean \"--all\"?\n");
  }
}

}  // namespace
}  // namespace arbiter::cli
