#include "cli/job_refs.h"

#include <gtest/gtest.h>

#include "cli/scancel.h"

namespace arbiter::cli {
namespace {

using Kind = JobRef::Kind;

TEST(JobRefs, SlurmsFormsOfJobIds) {
  auto job = ParseJobRef("123");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->kind, Kind::kJob);
  EXPECT_EQ(job->id, 123u);
  auto element = ParseJobRef("123_7");
  ASSERT_TRUE(element.ok()) << element.status().ToString();
  EXPECT_EQ(element->kind, Kind::kElements);
  EXPECT_EQ(element->id, 123u);
  EXPECT_EQ(element->indices, (std::vector<int64_t>{7}));
  EXPECT_TRUE(element->single_element);
  auto elements = ParseJobRef("123_[1-3,9]");
  ASSERT_TRUE(elements.ok()) << elements.status().ToString();
  EXPECT_EQ(elements->indices, (std::vector<int64_t>{1, 2, 3, 9}));
  EXPECT_FALSE(elements->single_element);
  auto range = ParseJobRef("11-20");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->kind, Kind::kRange);
  EXPECT_EQ(range->id, 11u);
  EXPECT_EQ(range->last, 20u);
  EXPECT_TRUE(ParseJobRef("1-10000").ok());
  // The single-job commands take a job or one element.
  EXPECT_TRUE(OneJobOnly(*job).ok());
  EXPECT_TRUE(OneJobOnly(*element).ok());
  EXPECT_FALSE(OneJobOnly(*elements).ok());
  EXPECT_FALSE(OneJobOnly(*range).ok());
}

TEST(JobRefs, MistakesNameTheReference) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : {
           Case{"",
                "job : use a job id (123), an array's element (123_7), elements "
                "(123_[1-5,9]) or a range of job ids (11-20)"},
           Case{"0", "job 0: use a job id"},
           Case{"12x", "job 12x: use a job id"},
           Case{"12_x", "job 12_x: 'x' is not an index"},
           Case{"12_[1-3", "job 12_[1-3: elements are written ARRAY_[INDICES], as 12_[1-5,9]"},
           Case{"12_[3-1]", "job 12_[3-1]: '3-1': the range ends before it starts"},
           Case{"20-11", "job 20-11: the range ends before it starts"},
           Case{"1-10001", "job 1-10001: a range holds at most 10000 job ids"},
           Case{"_3", "job _3: use a job id"},
       }) {
    auto r = ParseJobRef(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(c.message, 0), 0u) << r.status().message();
  }
}

TEST(Scancel, HostListsAndStatesAsSlurmWritesThem) {
  EXPECT_EQ(*ExpandHostList("gpu[01-03,07],cpu1", "nodelist"),
            (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu07", "cpu1"}));
  EXPECT_EQ(*ExpandHostList("box", "nodelist"), (std::vector<std::string>{"box"}));
  EXPECT_EQ(*ExpandHostList("n[8-10]-ib", "nodelist"),
            (std::vector<std::string>{"n8-ib", "n9-ib", "n10-ib"}));
  for (const char* bad : {"gpu[01-03", "gpu[a-b]", "gpu[3-1]", ""}) {
    EXPECT_EQ(ExpandHostList(bad, "nodelist").status().field(), "nodelist") << bad;
  }
  EXPECT_EQ(*ScancelStates("PD,r"), (std::set<std::string>{"pending", "retry-wait", "admitted",
                                                           "starting", "running", "preempting"}));
  EXPECT_EQ(*ScancelStates("SUSPENDED"), (std::set<std::string>{"suspended"}));
  auto bad = ScancelStates("COMPLETED");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--state=COMPLETED: 'COMPLETED' is not a state scancel takes: PENDING (PD), RUNNING "
            "(R) or SUSPENDED (S)");
}

}  // namespace
}  // namespace arbiter::cli
