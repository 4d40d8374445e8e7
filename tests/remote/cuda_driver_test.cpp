// The CUDA driver check of a bundle launch (remote/cuda_driver.h), on driver versions from real
// recorded nvidia-smi outputs (tests/data/gpu-cluster/).
#include <gtest/gtest.h>

#include "remote/cuda_driver.h"
#include "remote/probe_parsers.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

// A probed node whose GPUs report the driver of a recorded `nvidia-smi` table.
NodeInfo node_from_smi(const std::string& host, const std::string& file) {
  auto s = parse_smi_table(test::data(file));
  EXPECT_TRUE(s.ok()) << file;
  NodeInfo n;
  n.host = host;
  for (size_t i = 0; i < s->gpus.size(); ++i) {
    GpuInfo g;
    g.index = static_cast<int>(i);
    g.driver_version = s->driver_version;
    n.gpus.push_back(g);
  }
  return n;
}

TEST(CudaDriver, ParsesVersions) {
  EXPECT_EQ(parse_version("550.90.07"), (std::vector<int>{550, 90, 7}));
  EXPECT_EQ(parse_version(" 13.2 "), (std::vector<int>{13, 2}));
  EXPECT_TRUE(parse_version("").empty());
  EXPECT_TRUE(parse_version("N/A").empty());
  EXPECT_TRUE(parse_version("550..1").empty());
  EXPECT_TRUE(parse_version("550.").empty());
}

TEST(CudaDriver, H100Driver550IsRefusedForTheCuda13BundleWithNodeAndVersionsNamed) {
  const NodeInfo n = node_from_smi("gpu-a", "smi_8xH100_sxm_550.txt");
  ASSERT_EQ(n.gpus.size(), 8u);
  ASSERT_EQ(n.gpus[0].driver_version, "550.90.07");
  auto errors = check_cuda_nodes({n}, "13.2");
  ASSERT_EQ(errors.size(), 1u);
  const std::string m = errors[0].message();
  EXPECT_NE(m.find("gpu-a"), std::string::npos) << m;
  EXPECT_NE(m.find("550.90.07"), std::string::npos) << m;
  EXPECT_NE(m.find("13.2"), std::string::npos) << m;
  EXPECT_NE(m.find("580.65.06"), std::string::npos) << m;
}

TEST(CudaDriver, SameDriverRunsCuda124AndRuns128WithAWarning) {
  const NodeInfo n = node_from_smi("gpu-a", "smi_8xH100_sxm_550.txt");
  std::vector<std::string> warnings;
  EXPECT_TRUE(check_cuda_nodes({n}, "12.4", &warnings).empty());
  EXPECT_TRUE(warnings.empty());  // 550.90.07 >= 550.54.14, the driver 12.4 came with
  EXPECT_TRUE(check_cuda_nodes({n}, "12.8", &warnings).empty());
  ASSERT_EQ(warnings.size(), 1u);  // minor version compatibility: runs, with a warning
  EXPECT_NE(warnings[0].find("570.26"), std::string::npos) << warnings[0];
}

TEST(CudaDriver, Legacy510IsRefusedForCuda12AndOnlyThatNode) {
  const NodeInfo old = node_from_smi("esxi-a100", "smi_1xA100_pcie_510_legacy_esxi.txt");
  const NodeInfo recent = node_from_smi("a100-575", "smi_1xA100_80gb_pcie_575_with_process.txt");
  auto errors = check_cuda_nodes({recent, old}, "12.6");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "esxi-a100");
  EXPECT_NE(errors[0].message().find("525.60.13"), std::string::npos) << errors[0].message();
}

TEST(CudaDriver, CpuNodeAndUnknownCudaAreRefusedWithReasons) {
  NodeInfo cpu;
  cpu.host = "cpu-node";
  auto errors = check_cuda_nodes({cpu}, "12.4");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message().find("no GPU"), std::string::npos);
  EXPECT_FALSE(check_cuda_driver("n", "575.51.03", "10.2").ok());
  EXPECT_FALSE(check_cuda_driver("n", "575.51.03", "cuda").ok());
  EXPECT_FALSE(check_cuda_driver("n", "", "12.4").ok());
}

}  // namespace
}  // namespace meshwork::remote
