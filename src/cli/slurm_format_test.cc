// squeue's and sinfo's %-formats and sacct's field lists: parsing, widths, justification,
// cutting, the parsable styles.
#include "cli/slurm_format.h"

#include <gtest/gtest.h>

namespace arbiter::cli {
namespace {

TEST(PercentFormat, ParsesSqueuesDefault) {
  auto f = ParsePercentFormat("%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R", "iPjutMDR", "format");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->fields.size(), 8u);
  EXPECT_EQ(f->fields[0].letter, 'i');
  EXPECT_EQ(f->fields[0].width, 18);
  EXPECT_TRUE(f->fields[0].right);
  EXPECT_EQ(f->fields[0].suffix, " ");
  EXPECT_EQ(f->fields[7].letter, 'R');
  EXPECT_EQ(f->fields[7].width, 0);
  EXPECT_EQ(f->fields[7].suffix, "");
}

TEST(PercentFormat, PrefixLiteralsFitAndErrors) {
  auto f = ParsePercentFormat("[%i|%-5j|%#P] 100%%", "ijP", "format");
  ASSERT_FALSE(f.ok());  // '-' is not a justification here: it reads as the letter '-'
  f = ParsePercentFormat("[%i|%5j|%#P] 100%%", "ijP", "format");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->prefix, "[");
  EXPECT_EQ(f->fields[2].suffix, "] 100%");
  EXPECT_TRUE(f->fields[2].fit);
  auto unknown = ParsePercentFormat("%i %y", "ij", "format");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "format");
  EXPECT_NE(unknown.status().message().find("unknown field '%y'"), std::string::npos);
  EXPECT_FALSE(ParsePercentFormat("%.18", "i", "format").ok());
  EXPECT_FALSE(ParsePercentFormat("no fields", "i", "format").ok());
  EXPECT_FALSE(ParsePercentFormat("%1000i", "i", "format").ok());
}

TEST(PercentFormat, RendersWidthsJustifiesAndCuts) {
  auto f = ParsePercentFormat("%.5i %4j %#P|%t", "ijPt", "format");
  ASSERT_TRUE(f.ok());
  const std::string out =
      RenderPercent(*f, {"JOBID", "NAME", "PARTITION", "ST"},
                    {{"12", "training", "gpu*", "R"}, {"123456", "a", "x", "PD"}},
                    /*header=*/true);
  EXPECT_EQ(out,
            "JOBID NAME PARTITION|ST\n"
            "   12 trai gpu*     |R\n"
            "12345 a    x        |PD\n");
  EXPECT_EQ(RenderPercent(*f, {"JOBID", "NAME", "PARTITION", "ST"}, {{"1", "b", "c", "R"}}, false),
            "    1 b    c|R\n");
}

std::vector<SacctField> Known() {
  return {{"JobID", 12, false}, {"JobName", 10, true}, {"State", 10, true}, {"ExitCode", 8, true}};
}

TEST(SacctFields, NamesWithoutCaseAndWidths) {
  auto f = ParseSacctFields("jobid,JobName%30,state%-12,ExitCode", Known(), "format");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 4u);
  EXPECT_EQ((*f)[0].name, "JobID");
  EXPECT_EQ((*f)[1].width, 30);
  EXPECT_TRUE((*f)[1].right);
  EXPECT_EQ((*f)[2].width, 12);
  EXPECT_FALSE((*f)[2].right);
  auto bad = ParseSacctFields("JobID,Stat", Known(), "format");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown field 'Stat'; did you mean \"State\"?"),
            std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseSacctFields("JobID%x", Known(), "format").ok());
  EXPECT_FALSE(ParseSacctFields("JobID%0", Known(), "format").ok());
  EXPECT_FALSE(ParseSacctFields(",", Known(), "format").ok());
}

TEST(SacctFields, TableAndParsableStyles) {
  auto f = ParseSacctFields("JobID,JobName,State,ExitCode", Known(), "format");
  ASSERT_TRUE(f.ok());
  const std::vector<std::vector<std::string>> rows = {
      {"12", "train", "CANCELLED by alice", "0:15"},
      {"13_4", "a-very-long-name", "COMPLETED", "0:0"}};
  EXPECT_EQ(RenderSacct(*f, rows, true, SacctStyle::kTable),
            "JobID           JobName      State ExitCode \n"
            "------------ ---------- ---------- -------- \n"
            "12                train CANCELLED+     0:15 \n"
            "13_4         a-very-lo+  COMPLETED      0:0 \n");
  EXPECT_EQ(RenderSacct(*f, rows, false, SacctStyle::kParsable),
            "12|train|CANCELLED by alice|0:15|\n13_4|a-very-long-name|COMPLETED|0:0|\n");
  EXPECT_EQ(RenderSacct(*f, rows, true, SacctStyle::kParsable2),
            "JobID|JobName|State|ExitCode\n12|train|CANCELLED by alice|0:15\n"
            "13_4|a-very-long-name|COMPLETED|0:0\n");
}

}  // namespace
}  // namespace arbiter::cli
