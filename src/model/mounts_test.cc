#include "model/mounts.h"

#include <gtest/gtest.h>

#include "model/job.h"

namespace arbiter {
namespace {

TEST(MountsTest, PathsMustBeAbsoluteAndNormalized) {
  for (const char* good : {"/", "/data", "/data/imagenet", "/a_b/c-d.e"}) {
    EXPECT_EQ(MountPathProblem(good), "") << good;
  }
  const std::pair<const char*, const char*> bad[] = {
      {"", "must not be empty"},
      {"data", "must be an absolute path"},
      {"/data/", "must not end with '/'"},
      {"/data//x", "must not contain '//'"},
      {"/data/../etc", "must not contain '..'"},
      {"/data/./x", "must not contain '.' components"},
      {"/data:/etc", "must not contain ':' or ','"},
      {"/da\nta", "must not contain control characters"},
  };
  for (const auto& [path, why] : bad) EXPECT_EQ(MountPathProblem(path), why) << path;
}

TEST(MountsTest, UnderMeansComponentByComponent) {
  EXPECT_TRUE(PathIsUnder("/data/imagenet", "/data/imagenet"));
  EXPECT_TRUE(PathIsUnder("/data/imagenet/train", "/data/imagenet"));
  EXPECT_FALSE(PathIsUnder("/data/imagenet2", "/data/imagenet"));
  EXPECT_FALSE(PathIsUnder("/data", "/data/imagenet"));
  EXPECT_TRUE(PathIsUnder("/anything", "/"));
}

TEST(MountsTest, RulesAllowPathsUnderThemAndWritesOnlyWhereTheyAreReadWrite) {
  const std::vector<MountRule> rules = {{"/data/imagenet", true}, {"/checkpoints/vision", false}};
  EXPECT_TRUE(CheckMountsAllowed({{"/data/imagenet", "/data", true}}, rules, "vision").ok());
  EXPECT_TRUE(CheckMountsAllowed({{"/checkpoints/vision/run1", "", false}}, rules, "vision").ok());
  EXPECT_TRUE(CheckMountsAllowed({{"/checkpoints/vision", "", true}}, rules, "vision").ok());

  Status outside =
      CheckMountsAllowed({{"/data/imagenet", "", true}, {"/etc", "", true}}, rules, "vision");
  EXPECT_EQ(outside.field(), "mounts[1].path");
  EXPECT_EQ(outside.message(),
            "/etc is not under an allowed path of tenant vision (/data/imagenet ro, "
            "/checkpoints/vision rw)");

  Status write = CheckMountsAllowed({{"/data/imagenet/train", "", false}}, rules, "vision");
  EXPECT_EQ(write.field(), "mounts[0].mode");
  EXPECT_NE(write.message().find("may only be mounted read-only by tenant vision"),
            std::string::npos)
      << write.message();

  Status none = CheckMountsAllowed({{"/data", "", true}}, {}, "nlp", "template.mounts");
  EXPECT_EQ(none.field(), "template.mounts[0].path");
  EXPECT_EQ(none.message(), "/data is not under an allowed path of tenant nlp (none)");
}

TEST(MountsTest, ImageRegistriesAsEnginesReadThem) {
  EXPECT_EQ(ImageRegistry("ubuntu"), "docker.io");
  EXPECT_EQ(CanonicalImage("ubuntu"), "docker.io/library/ubuntu");
  EXPECT_EQ(CanonicalImage("pytorch/pytorch:2.3"), "docker.io/pytorch/pytorch:2.3");
  EXPECT_EQ(ImageRegistry("registry.example.com/vision/train:1"), "registry.example.com");
  EXPECT_EQ(ImageRegistry("localhost:5000/x"), "localhost:5000");
  EXPECT_EQ(ImageRegistry("localhost/x"), "localhost");
  EXPECT_EQ(CanonicalImage("docker.io/library/perl"), "docker.io/library/perl");
}

TEST(MountsTest, ImagesMatchRegistryPrefixesByComponent) {
  ImagePolicy any;
  EXPECT_TRUE(ImageAllowed("anything/at:all", any));

  ImagePolicy vision;
  vision.registries = std::vector<std::string>{"registry.example.com/vision/", "localhost:5000"};
  EXPECT_TRUE(ImageAllowed("registry.example.com/vision/train:1.2", vision));
  EXPECT_FALSE(ImageAllowed("registry.example.com/nlp/train:1.2", vision));
  EXPECT_FALSE(ImageAllowed("registry.example.com/visionary/x", vision));
  EXPECT_TRUE(ImageAllowed("localhost:5000/busybox@sha256:abc", vision));
  EXPECT_FALSE(ImageAllowed("localhost:50001/busybox", vision));
  EXPECT_FALSE(ImageAllowed("ubuntu", vision));

  Status st = CheckImageAllowed("ubuntu:22.04", vision, "vision");
  EXPECT_EQ(st.field(), "container_image");
  EXPECT_EQ(st.message(),
            "ubuntu:22.04 is not from a registry tenant vision may use "
            "(registry.example.com/vision/, localhost:5000)");

  ImagePolicy none;
  none.registries = std::vector<std::string>{};
  EXPECT_FALSE(ImageAllowed("registry.example.com/vision/x", none));
  EXPECT_NE(CheckImageAllowed("x", none, "t").message().find("(none)"), std::string::npos);
}

TEST(MountsTest, JobMountsNeedAnImageAndDistinctTargets) {
  JobSpec job;
  job.command = {"true"};
  job.mounts = {{"/data", "", true}};
  Status st = ValidateJobSpec(job);
  EXPECT_EQ(st.field(), "mounts");
  EXPECT_NE(st.message().find("set container_image"), std::string::npos) << st.message();

  job.container_image = "busybox";
  EXPECT_TRUE(ValidateJobSpec(job).ok());

  job.mounts = {{"/data/../etc", "", true}};
  st = ValidateJobSpec(job);
  EXPECT_EQ(st.field(), "mounts[0].path");
  EXPECT_EQ(st.message(), "/data/../etc: must not contain '..'");

  job.mounts = {{"/data", "x", true}};
  EXPECT_EQ(ValidateJobSpec(job).field(), "mounts[0].target");

  job.mounts = {{"/data/a", "/in", true}, {"/data/b", "/in", false}};
  st = ValidateJobSpec(job);
  EXPECT_EQ(st.field(), "mounts[1].target");
  EXPECT_EQ(st.message(), "/in is already the target of mounts[0]");
}

}  // namespace
}  // namespace arbiter
