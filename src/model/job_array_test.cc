#include "model/job_array.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/job.h"

namespace arbiter {
namespace {

using Indices = std::vector<int64_t>;

TEST(JobArray, SlurmSyntaxExpandsToAscendingIndicesEachOnce) {
  EXPECT_EQ(*ExpandArrayIndices("0-3", "array"), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(*ExpandArrayIndices("1,3,5", "array"), (Indices{1, 3, 5}));
  EXPECT_EQ(*ExpandArrayIndices("0-20:10,3", "array"), (Indices{0, 3, 10, 20}));
  EXPECT_EQ(*ExpandArrayIndices("2,2,1-2", "array"), (Indices{1, 2}));
  EXPECT_EQ(ExpandArrayIndices("0-99:2,200", "array")->size(), 51u);
  EXPECT_EQ(ExpandArrayIndices("0-9999", "array")->size(), kMaxArrayElements);
}

TEST(JobArray, BadSpecsNameThePart) {
  struct Case {
    const char* spec;
    const char* message;
  };
  for (const Case& c : {
           Case{"", "no indices: use N, N-M or N-M:STEP, joined by commas"},
           Case{"5-2", "'5-2': the range ends before it starts"},
           Case{"0-9:0", "'0-9:0': the step must be a whole number >= 1"},
           Case{"a-b", "'a-b': use indices 0 to 4000000, as N, N-M or N-M:STEP, joined by commas"},
           Case{"1,,2", "'': use indices 0 to 4000000, as N, N-M or N-M:STEP, joined by commas"},
           Case{"4000001",
                "'4000001': use indices 0 to 4000000, as N, N-M or N-M:STEP, joined by "
                "commas"},
           Case{"0-10000", "more than 10000 indices"},
           Case{"0-5000,6000-11000", "10002 indices: at most 10000"},
           Case{"0-9%2", "'%N' (how many run at once) is not part of the indices: give it apart"},
       }) {
    auto r = ExpandArrayIndices(c.spec, "array.indices");
    ASSERT_FALSE(r.ok()) << c.spec;
    EXPECT_EQ(r.status().field(), "array.indices") << c.spec;
    EXPECT_EQ(r.status().message(), c.message) << c.spec;
  }
}

TEST(JobArray, TextAndBoundsAsSlurmGivesThem) {
  EXPECT_EQ(ArrayIndicesText({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(ArrayIndicesText({0, 5, 10, 15}), "0-15:5");
  EXPECT_EQ(ArrayIndicesText({1, 3, 7, 8, 9}), "1,3,7-9");
  EXPECT_EQ(ArrayIndicesText({4}), "4");
  EXPECT_EQ(ArrayIndicesText({4, 9}), "4,9");
  EXPECT_EQ(BoundsOf({0, 1, 2, 3}), (ArrayBounds{0, 3, 1}));
  EXPECT_EQ(BoundsOf({0, 4, 8}), (ArrayBounds{0, 8, 4}));
  EXPECT_EQ(BoundsOf({1, 3, 7}), (ArrayBounds{1, 7, 1}));  // no one step
  EXPECT_EQ(BoundsOf({7}), (ArrayBounds{7, 7, 1}));
  for (const char* spec : {"0-9", "0-20:5", "1,3,7-9", "2"}) {
    EXPECT_EQ(ArrayIndicesText(*ExpandArrayIndices(spec, "array")), spec);
  }
}

TEST(JobArray, AnElementsPlaceIsValidated) {
  JobSpec j;
  j.queue = "q";
  j.array = {12, 3, 8, 2};
  EXPECT_TRUE(ValidateJobSpec(j).ok());
  j.array.index = kMaxArrayIndex + 1;
  EXPECT_EQ(ValidateJobSpec(j).field(), "array.index");
  j.array = {12, 3, 0, 0};
  EXPECT_EQ(ValidateJobSpec(j).field(), "array.size");
  j.array = {12, 3, 8, -1};
  EXPECT_EQ(ValidateJobSpec(j).field(), "array.max_running");
}

}  // namespace
}  // namespace arbiter
