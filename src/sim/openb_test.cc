#include "sim/openb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace arbiter::sim {
namespace {

using ::testing::HasSubstr;

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

constexpr const char* kLongHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(OpenbNodes, ParsesNodesAndOneModelPerName) {
  auto c = ParseOpenbNodes(
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "n0,64000,262144,2,P100\n"
      "n1,96000,393216,8,G2\r\n"
      "n2,32000,131072,0,\n"
      "\n"
      "n3,16000,122880,2,P100\n",
      "nodes.csv");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->models.size(), 2u);
  EXPECT_EQ(c->models[0].name, "P100");
  EXPECT_EQ(c->models[1].name, "G2");
  EXPECT_EQ(c->models[1].memory_mib, TraceGpuMemoryMib("G2"));
  ASSERT_EQ(c->nodes.size(), 4u);
  EXPECT_EQ(c->nodes[1].name, "n1");
  EXPECT_EQ(c->nodes[1].cpu_milli, 96000);
  EXPECT_EQ(c->nodes[1].memory_mib, 393216);
  ASSERT_EQ(c->nodes[1].gpus.size(), 8u);
  EXPECT_EQ(c->nodes[1].gpus[7].index, 7);
  EXPECT_EQ(c->nodes[1].gpus[7].model, "G2");
  EXPECT_TRUE(c->nodes[2].gpus.empty());
}

struct BadRow {
  std::string name;
  std::string text;
  std::string where;    // "file:line:column"
  std::string message;  // a part of the message
};
void PrintTo(const BadRow& r, std::ostream* os) { *os << r.name; }

class OpenbNodeErrors : public ::testing::TestWithParam<BadRow> {};

TEST_P(OpenbNodeErrors, NameFileLineAndColumn) {
  auto c = ParseOpenbNodes(GetParam().text, "nodes.csv");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().field(), GetParam().where) << c.status().ToString();
  EXPECT_THAT(c.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OpenbNodeErrors,
    ::testing::Values(
        BadRow{"Header", "sn,cpu,memory_mib,gpu,model\nn0,1,1,0,\n", "nodes.csv:1:1", "header"},
        BadRow{"Empty", "", "nodes.csv:1:1", "empty file"},
        BadRow{"Cpu", "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1,0,\nn1,6.4k,1,0,\n",
               "nodes.csv:3:2", "cpu_milli: expected a whole number"},
        BadRow{"NegativeMemory", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,-5,0,\n", "nodes.csv:2:3",
               "memory_mib"},
        BadRow{"GpuCount", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,two,T4\n", "nodes.csv:2:4",
               "gpu: expected a whole number"},
        BadRow{"NoModel", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,\n", "nodes.csv:2:5",
               "needs a GPU model"},
        BadRow{"Columns", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2\n", "nodes.csv:2:1",
               "expected 5 comma-separated columns, got 4"},
        BadRow{"Duplicate", "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,\nn0,1,1,0,\n",
               "nodes.csv:3:1", "duplicate node 'n0'"},
        BadRow{"Name", "sn,cpu_milli,memory_mib,gpu,model\nbad name,1,1,0,\n", "nodes.csv:2:1",
               "not a node name"}),
    [](const ::testing::TestParamInfo<BadRow>& p) { return p.param.name; });

TEST(OpenbPods, ParsesTheElevenColumnForm) {
  auto t = ParseOpenbPods(std::string(kLongHeader) +
                              "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                              "p1,6000,12288,1,460,T4|P100|T4,BE,Failed,427061,12902960,\n"
                              "p2,88000,327680,8,1000,,LS,Running,5,9,7\n"
                              "p3,4000,15258,0,0,,BE,Succeeded,1,2,3\n",
                          "pods.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 4u);
  const TraceTask& share = (*t)[1];
  EXPECT_EQ(share.name, "p1");
  EXPECT_EQ(share.resources.cpu_milli, 6000);
  EXPECT_EQ(share.resources.memory_mib, 12288);
  EXPECT_EQ(share.resources.gpus, 1);
  EXPECT_EQ(share.resources.gpu_milli, 460);
  EXPECT_TRUE(share.resources.fractional());
  EXPECT_EQ(share.gpu_spec, "T4|P100|T4");
  EXPECT_EQ(share.gpu_models, (std::vector<std::string>{"T4", "P100"}));
  EXPECT_EQ(share.creation_time, 427061);
  EXPECT_EQ(share.scheduled_time, -1);  // empty column
  EXPECT_EQ((*t)[2].resources.total_gpu_milli(), 8000);
  EXPECT_EQ((*t)[3].resources.gpus, 0);
  EXPECT_EQ((*t)[3].resources.total_gpu_milli(), 0);
  EXPECT_TRUE((*t)[0].gpu_models.empty());
}

TEST(OpenbPods, ParsesTheFiveColumnForm) {
  auto t = ParseOpenbPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "p0,12000,16384,4,1000\n"
      "p1,6000,12288,1,460\n",
      "multigpu.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].resources.gpus, 4);
  EXPECT_TRUE((*t)[0].gpu_spec.empty());
  EXPECT_EQ((*t)[0].creation_time, -1);
  EXPECT_EQ((*t)[1].resources.gpu_milli, 460);
}

class OpenbPodErrors : public ::testing::TestWithParam<BadRow> {};

TEST_P(OpenbPodErrors, NameFileLineAndColumn) {
  auto t = ParseOpenbPods(GetParam().text, "pods.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().field(), GetParam().where) << t.status().ToString();
  EXPECT_THAT(t.status().message(), HasSubstr(GetParam().message));
}

const std::string kShort = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
const std::string kLong = kLongHeader;

INSTANTIATE_TEST_SUITE_P(
    Cases, OpenbPodErrors,
    ::testing::Values(
        BadRow{"Header", "name,cpu_milli\np0,1\n", "pods.csv:1:1", "expected the header"},
        BadRow{"NumGpu", kShort + "p0,1,1,1,1000\np1,1,1,x,1000\n", "pods.csv:3:4",
               "num_gpu: expected a whole number from 0 to 64, got 'x'"},
        BadRow{"TooManyGpus", kShort + "p0,1,1,65,1000\n", "pods.csv:2:4", "num_gpu"},
        BadRow{"GpuMilli", kShort + "p0,1,1,1,1500\n", "pods.csv:2:5", "gpu_milli"},
        BadRow{"ShareOfSeveral", kShort + "p0,1,1,2,500\n", "pods.csv:2:5",
               "below 1000 only for one GPU"},
        BadRow{"MilliWithoutGpu", kShort + "p0,1,1,0,500\n", "pods.csv:2:5",
               "must be 0 for a task without GPUs"},
        BadRow{"GpuWithoutMilli", kShort + "p0,1,1,1,0\n", "pods.csv:2:5", "must be above 0"},
        BadRow{"Cpu", kShort + "p0,-1,1,0,0\n", "pods.csv:2:2", "cpu_milli"},
        BadRow{"EmptyName", kShort + ",1,1,0,0\n", "pods.csv:2:1", "name: must not be empty"},
        BadRow{"Columns", kLong + "p0,1,1,0,0,,LS,Running,1,2\n", "pods.csv:2:1",
               "expected 11 comma-separated columns, got 10"},
        BadRow{"Time", kLong + "p0,1,1,0,0,,LS,Running,1,soon,3\n", "pods.csv:2:10",
               "deletion_time"}),
    [](const ::testing::TestParamInfo<BadRow>& p) { return p.param.name; });

TEST(OpenbFiles, LoadsTheFixture) {
  auto nodes = LoadOpenbNodes(kFixtures + "/nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(nodes->nodes.size(), 61u);
  auto pods = LoadOpenbPods(kFixtures + "/pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->size(), 255u);
  auto multi = LoadOpenbPods(kFixtures + "/pods_multigpu.csv");
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  EXPECT_EQ(multi->size(), 53u);
  auto spec = LoadOpenbPods(kFixtures + "/pods_gpuspec.csv");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  for (const TraceTask& t : *spec) EXPECT_FALSE(t.gpu_models.empty()) << t.name;
}

TEST(OpenbFiles, MissingFileNamesThePath) {
  auto pods = LoadOpenbPods(kFixtures + "/no-such-file.csv");
  ASSERT_FALSE(pods.ok());
  EXPECT_EQ(pods.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(pods.status().message(), HasSubstr("no-such-file.csv"));
}

TEST(OpenbFiles, ErrorsNameTheFilePath) {
  auto nodes = LoadOpenbNodes(kFixtures + "/pods.csv");  // a pod list is not a node list
  ASSERT_FALSE(nodes.ok());
  EXPECT_THAT(nodes.status().field(), HasSubstr("pods.csv:1:1"));
}

}  // namespace
}  // namespace arbiter::sim
