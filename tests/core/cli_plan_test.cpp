// Integration: runs the built `meshwork plan` (bin/meshwork next to this test binary;
// its own executable, label integration, built after the meshwork target) and checks
// exit codes, stderr words and the --json document.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int rc = -1;
  std::string out;
  std::string err;
};

fs::path meshwork_binary() {
  return fs::read_symlink("/proc/self/exe").parent_path() / "meshwork";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun plan(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string cmd = meshwork_binary().string() + " plan " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

const std::string kCluster =
    "--model llama-3.1-8b --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 8192 "
    "--micro-batch 1";

class CliPlanIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    // CMake makes this test depend on the meshwork target, so a missing binary is a failure.
    ASSERT_TRUE(fs::exists(meshwork_binary())) << meshwork_binary() << " is not built";
  }
};

}  // namespace

TEST_F(CliPlanIntegration, JsonRankedShapesExitZero) {
  CliRun r = plan(kCluster + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["model"]["name"], "llama-3.1-8b");
  EXPECT_EQ(j["model"]["params"], 8'030'261'248);
  ASSERT_EQ(j["shapes"].size(), 35u);  // every factorization of 16: meshtrain runs them all
  EXPECT_TRUE(j["shapes"][0]["fits"].get<bool>());
  EXPECT_GT(j["shapes"][0]["tokens_per_s"].get<double>(), 0);
  EXPECT_LE(j["shapes"][0]["memory_bytes"]["total"].get<int64_t>(), 80LL << 30);
  EXPECT_TRUE(j["shapes"][0]["comm_s"].contains("dp_shard"));
}

TEST_F(CliPlanIntegration, HumanTable) {
  CliRun r = plan(kCluster + " --precision bf16 --activation-checkpointing full");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Memory per rank in GiB"), std::string::npos);
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
  EXPECT_NE(r.out.find("35 valid shape(s); Accelerate would refuse #"), std::string::npos) << r.out;
}

TEST_F(CliPlanIntegration, SizesInEveryUnitAgree) {
  for (const char* size : {"80GiB", "81920MiB", "85899345920B"}) {
    CliRun r = plan("--model tiny --nodes 1 --gpus-per-node 4 --gpu-memory " + std::string(size) +
                 " --seq-len 256 --micro-batch 1 --json");
    ASSERT_EQ(r.rc, 0) << size << r.err;
  }
  EXPECT_EQ(plan("--model tiny --nodes 1 --gpus-per-node 4 --gpu-memory 80GB --seq-len 256 "
                 "--micro-batch 1 --json")
                .rc,
            0);
}

TEST_F(CliPlanIntegration, FullyGivenShape) {
  CliRun r = plan(kCluster + " --dp-replicate 2 --dp-shard 4 --cp 1 --tp 2 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["shapes"].size(), 1u);
  EXPECT_EQ(j["shapes"][0]["tp"], 2);
}

TEST_F(CliPlanIntegration, NothingFitsExitsThree) {
  CliRun r = plan("--model llama-3.1-405b --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB "
               "--seq-len 8192 --micro-batch 1 --json");
  EXPECT_EQ(r.rc, 3) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["shapes"][0]["fits"].get<bool>());
}

TEST_F(CliPlanIntegration, InvalidInputExitsTwoWithFieldValueAllowed) {
  CliRun size = plan("--model tiny --nodes 1 --gpus-per-node 8 --gpu-memory 80 --seq-len 8 "
                  "--micro-batch 1");
  EXPECT_EQ(size.rc, 2);
  EXPECT_EQ(size.err.rfind("meshwork: --gpu-memory: 80: ", 0), 0u) << size.err;
  EXPECT_TRUE(size.out.empty());

  CliRun shape = plan(kCluster + " --global-batch 8 --dp-replicate 16 --dp-shard 1 --cp 1 --tp 1");
  EXPECT_EQ(shape.rc, 2);
  EXPECT_EQ(shape.err.rfind("meshwork: global_batch: 8: ", 0), 0u) << shape.err;

  CliRun model = plan("--model no-such-model --nodes 1 --gpus-per-node 8 --gpu-memory 80GiB "
                   "--seq-len 8 --micro-batch 1");
  EXPECT_EQ(model.rc, 2);
  EXPECT_EQ(model.err.rfind("meshwork: --model: no-such-model: ", 0), 0u) << model.err;

  EXPECT_EQ(plan("--model tiny").rc, 2);
  EXPECT_EQ(plan(kCluster + " --precision fp16").rc, 2);
  EXPECT_EQ(plan(kCluster + " --tp 3").rc, 2);
  EXPECT_EQ(plan(kCluster + " --frobnicate").rc, 2);
}

TEST_F(CliPlanIntegration, HuggingFaceModelDirectory) {
  // A model directory as save_pretrained leaves it (config.json beside the weights): the same
  // plan as the preset whose config.json it holds.
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_hf_" + std::to_string(getpid())) / "Llama-8B";
  fs::create_directories(dir);
  fs::copy_file(fs::path(MESHWORK_RESOURCE_DIR) / "models" / "llama-3.1-8b.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {}})";
  CliRun r = plan("--model " + dir.string() +
                  " --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 8192 --micro-batch 1 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["name"], "Llama-8B");
  EXPECT_EQ(j["model"]["params"], 8'030'261'248);
  fs::remove_all(dir.parent_path());
}
