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
  EXPECT_TRUE(CheckMountsAllowed({{"/data/imagenet", "/data", true}}, rules, {}, "vision").ok());
  EXPECT_TRUE(
      CheckMountsAllowed({{"/checkpoints/vision/run1", "", false}}, rules, {}, "vision").ok());
  EXPECT_TRUE(CheckMountsAllowed({{"/checkpoints/vision", "", true}}, rules, {}, "vision").ok());

  Status outside =
      CheckMountsAllowed({{"/data/imagenet", "", true}, {"/etc", "", true}}, rules, {}, "vision");
  EXPECT_EQ(outside.field(), "mounts[1].path");
  EXPECT_EQ(outside.message(),
            "/etc is not under an allowed path of tenant vision (/data/imagenet ro, "
            "/checkpoints/vision rw)");

  Status write = CheckMountsAllowed({{"/data/imagenet/train", "", false}}, rules, {}, "vision");
  EXPECT_EQ(write.field(), "mounts[0].mode");
  EXPECT_NE(write.message().find("may only be mounted read-only by tenant vision"),
            std::string::npos)
      << write.message();

  Status none = CheckMountsAllowed({{"/data", "", true}}, {}, {}, "nlp", "template.mounts");
  EXPECT_EQ(none.field(), "template.mounts[0].path");
  EXPECT_EQ(none.message(), "/data is not under an allowed path of tenant nlp (none)");
}

TEST(MountsTest, VolumeNamesAreDnsLabels) {
  for (const char* good : {"ckpt", "a", "ckpt-2", "0data", "a1-b2-c3"}) {
    EXPECT_TRUE(IsValidVolumeName(good)) << good;
  }
  for (const char* bad : {"", "-ckpt", "ckpt-", "Ckpt", "ck_pt", "ck.pt", "ck/pt", "..",
                          "a234567890123456789012345678901234567890123456789012345678901234"}) {
    EXPECT_FALSE(IsValidVolumeName(bad)) << bad;
  }
  EXPECT_EQ(VolumeEnvName("ckpt"), "ARBITER_VOLUME_CKPT");
  EXPECT_EQ(VolumeEnvName("ckpt-2"), "ARBITER_VOLUME_CKPT_2");
}

TEST(MountsTest, VolumesAreTheTenantsOwnAndReadOnlyWhereTheRuleIs) {
  const std::vector<VolumeRule> volumes = {{"ckpt", false, 500}, {"datasets", true, 0}};
  Mount ckpt{"", "/ckpt", false, "ckpt"};
  Mount data_ro{"", "/data", true, "datasets"};
  EXPECT_TRUE(CheckMountsAllowed({ckpt, data_ro}, {}, volumes, "vision").ok());
  Mount ckpt_ro = ckpt;
  ckpt_ro.read_only = true;
  EXPECT_TRUE(CheckMountsAllowed({ckpt_ro}, {}, volumes, "vision").ok());

  Mount missing{"", "/s", false, "scratch"};
  Status none = CheckMountsAllowed({ckpt, missing}, {}, volumes, "vision");
  EXPECT_EQ(none.field(), "mounts[1].volume");
  EXPECT_EQ(none.message(), "tenant vision has no volume scratch (volumes: ckpt rw, datasets ro)");

  Mount data_rw = data_ro;
  data_rw.read_only = false;
  Status write = CheckMountsAllowed({data_rw}, {}, volumes, "vision", "template.mounts");
  EXPECT_EQ(write.field(), "template.mounts[0].mode");
  EXPECT_NE(write.message().find("volume datasets may only be mounted read-only by tenant vision"),
            std::string::npos)
      << write.message();

  // A tenant without volumes has none, whatever another tenant calls its own.
  Status other = CheckMountsAllowed({ckpt}, {}, {}, "nlp");
  EXPECT_EQ(other.field(), "mounts[0].volume");
  EXPECT_EQ(other.message(), "tenant nlp has no volume ckpt (volumes: none)");
  // Host-path rules say nothing of volumes, and volumes nothing of host paths.
  EXPECT_FALSE(CheckMountsAllowed({{"/ckpt", "", false}}, {}, volumes, "vision").ok());
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

// A volume needs no image: a host process finds its folder in ARBITER_VOLUME_<NAME>, and may
// write there whatever the mode says (so it takes volumes read-write only).
TEST(MountsTest, JobVolumesWithAndWithoutAnImage) {
  JobSpec job;
  job.command = {"true"};
  job.mounts = {{"", "", false, "ckpt"}, {"", "", false, "scratch"}};
  EXPECT_TRUE(ValidateJobSpec(job).ok());

  struct Case {
    std::vector<Mount> mounts;
    const char* image;
    const char* field;
    const char* message;
  };
  const Case cases[] = {
      {{{"/data", "", false, "ckpt"}}, "", "mounts[0].volume", "not both"},
      {{{"", "", false, "Ckpt"}}, "", "mounts[0].volume", "is not a volume name"},
      {{{"", "", false, "ckpt-"}}, "busybox", "mounts[0].volume", "is not a volume name"},
      {{{"", "/ckpt", false, "ckpt"}}, "", "mounts[0].target", "$ARBITER_VOLUME_CKPT"},
      {{{"", "", true, "ckpt"}}, "", "mounts[0].mode", "set container_image"},
      {{{"", "", false, "ckpt"}}, "busybox", "mounts[0].target", "is required"},
      {{{"", "ckpt", false, "ckpt"}}, "busybox", "mounts[0].target", "absolute"},
      {{{"", "", false, "ckpt"}, {"", "", false, "ckpt"}},
       "",
       "mounts[1].volume",
       "already mounted by mounts[0]"},
      {{{"", "/in", false, "ckpt"}, {"/data", "/in", true}},
       "busybox",
       "mounts[1].target",
       "/in is already the target of mounts[0]"},
      {{{"", "", false, "ckpt"}, {"/data", "", true}}, "", "mounts", "set container_image"},
  };
  for (const Case& c : cases) {
    job.mounts = c.mounts;
    job.container_image = c.image;
    const Status st = ValidateJobSpec(job);
    EXPECT_EQ(st.field(), c.field) << st.ToString();
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.ToString();
  }

  job.container_image = "busybox";
  job.mounts = {{"", "/ckpt", true, "ckpt"}, {"/data", "", true}};
  EXPECT_TRUE(ValidateJobSpec(job).ok());
}

}  // namespace
}  // namespace arbiter
