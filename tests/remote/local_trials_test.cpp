// `meshwork plan ... --try K --steps N --local`: the planner's best fitting shapes launched for
// real, one after another (deploy, supervisor, real 2-rank meshtrain runs, metrics streamed into
// the store), kept as a trial group whose predictions are make_plan's, ranked by the tokens/s the
// store measured; and a trial whose launch fails is reported while the next one is still tried.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <set>

#include "core/planner.h"
#include "core/shell_quote.h"
#include "core/store/run_frame.h"
#include "core/store/run_store.h"
#include "core/store/trials.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;

std::string meshtrain() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

int meshwork(std::vector<std::string> args, const fs::path& tmp) {
  args.insert(args.begin(), std::string(MESHWORK_BIN_DIR) + "/meshwork");
  const std::string cmd = shell_join(args) + " > " + shell_quote((tmp / "out").string()) + " 2> " +
                          shell_quote((tmp / "err").string());
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The plan both the command and the test make: tiny on this machine's 2 CPU ranks.
const std::vector<std::string> kPlanFlags = {"plan", "--model", "tiny", "--nodes", "1", "--gpus-per-node", "2",
                                             "--gpu-memory", "1GiB", "--seq-len", "64", "--micro-batch", "1",
                                             "--device", "cpu", "--precision", "fp32"};

PlanQuery plan_query() {
  PlanQuery q;
  q.model = *load_model_spec("tiny");
  q.nodes = 1;
  q.gpus_per_node = 2;
  q.device_memory_bytes = int64_t{1} << 30;
  q.training.seq_len = 64;
  q.training.micro_batch = 1;
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cpu;
  q.estimate.hardware = HardwareModel::for_device(DeviceKind::cpu);
  return q;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(LocalTrials, TopTwoShapesRunForRealAndAreRankedByTheirStoredTokensPerSecond) {
  ASSERT_TRUE(fs::exists(meshtrain())) << meshtrain() << " is not built";
  const fs::path tmp = test::temp_dir("local-trials");
  const fs::path db = tmp / "runs.db";
  const int code = meshwork(with(kPlanFlags, {"--try", "2", "--steps", "2", "--local", "--nproc-per-node", "2",
                                              "--remote-root", (tmp / "runs").string(), "--meshtrain", meshtrain(),
                                              "--master-port", std::to_string(33000 + ::getpid() % 900), "--db",
                                              db.string(), "--json"}),
                            tmp);
  const std::string out = test::read_text(tmp / "out"), err = test::read_text(tmp / "err");
  ASSERT_EQ(code, 0) << err << out;

  // The make_plan the command made: the first two shapes that fit, in its order.
  auto plan = make_plan(plan_query());
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  std::vector<PlanEntry> expected;
  for (const PlanEntry& e : plan->shapes)
    if (e.fits && expected.size() < 2) expected.push_back(e);
  ASSERT_EQ(expected.size(), 2u);

  auto store = store::RunStore::open(db);
  ASSERT_TRUE(store.ok());
  auto groups = store::list_trials(**store);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].shapes, 2);
  auto trial = store::load_trial(**store, (*groups)[0].id);
  ASSERT_TRUE(trial.ok()) << trial.error().message();
  ASSERT_EQ(trial->results.size(), 2u);
  EXPECT_EQ(trial->plan["steps"], 2);
  EXPECT_EQ(trial->plan["plan"], plan_to_json(*plan));  // what was planned is kept with the group

  std::set<store::RunId> runs;
  for (const store::TrialResult& r : trial->results) {
    SCOPED_TRACE("trial #" + std::to_string(r.position));
    ASSERT_GE(r.position, 1);
    ASSERT_LE(r.position, 2);
    const PlanEntry& e = expected[static_cast<size_t>(r.position - 1)];
    // The predictions stored are make_plan's for that shape.
    EXPECT_EQ(r.predicted.shape, e.shape);
    EXPECT_DOUBLE_EQ(r.predicted.tokens_per_s, e.time.tokens_per_s);
    EXPECT_DOUBLE_EQ(r.predicted.step_s, e.time.step_s);
    EXPECT_EQ(r.predicted.peak_bytes, e.memory.total());
    // A real run of that shape, ended ok, for the steps asked.
    ASSERT_TRUE(r.run);
    runs.insert(*r.run);
    auto info = (*store)->get_run(*r.run);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->summary.status, "ok") << info->summary.exit_reason;
    EXPECT_EQ(info->summary.name,
              "trial " + std::to_string(trial->id) + " #" + std::to_string(r.position) + " " + e.shape.compact());
    EXPECT_EQ(info->summary.shape, e.shape);
    EXPECT_EQ(info->config["training"]["steps"], 2);
    EXPECT_EQ(info->summary.steps, 1);  // steps 0 and 1
    EXPECT_EQ(info->summary.world, 2);
    // Measured: the store's tokens/s of the run, and a peak per rank the ranks reported.
    ASSERT_TRUE(r.tokens_per_s);
    EXPECT_GT(*r.tokens_per_s, 0);
    EXPECT_EQ(r.tokens_per_s, store::run_tokens_per_s(info->summary));
    ASSERT_TRUE(r.peak_bytes);
    EXPECT_GT(*r.peak_bytes, 0);
  }
  EXPECT_EQ(runs.size(), 2u);
  // Ranked by measured tokens/s.
  EXPECT_GE(*trial->results[0].tokens_per_s, *trial->results[1].tokens_per_s);
  ASSERT_NE(trial->winner(), nullptr);
  EXPECT_EQ(trial->winner()->position, trial->results[0].position);

  // --json printed the group as the store holds it.
  const nlohmann::json doc = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << out;
  EXPECT_EQ(doc["id"], trial->id);
  EXPECT_EQ(doc["winner"], trial->winner()->position);
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["run"], *trial->results[0].run);
  EXPECT_NE(err.find("trial " + std::to_string(trial->id) + " #2/2"), std::string::npos) << err;
}

TEST(LocalTrials, ATrialThatCannotLaunchIsReportedAndTheNextIsStillTried) {
  const fs::path tmp = test::temp_dir("local-trials-fail");
  const fs::path db = tmp / "runs.db";
  // No meshtrain to deploy: each launch is refused before a run exists, in the launch's words.
  const int code = meshwork(with(kPlanFlags, {"--try", "2", "--steps", "2", "--local", "--nproc-per-node", "2",
                                              "--remote-root", (tmp / "runs").string(), "--meshtrain",
                                              (tmp / "no-meshtrain").string(), "--db", db.string()}),
                            tmp);
  const std::string out = test::read_text(tmp / "out");
  EXPECT_EQ(code, 2) << test::read_text(tmp / "err") << out;  // invalid input, as `meshwork launch` says
  auto store = store::RunStore::open(db);
  ASSERT_TRUE(store.ok());
  auto groups = store::list_trials(**store);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 1u);
  auto trial = store::load_trial(**store, (*groups)[0].id);
  ASSERT_TRUE(trial.ok());
  ASSERT_EQ(trial->results.size(), 2u);
  for (const store::TrialResult& r : trial->results) {
    EXPECT_EQ(r.status, store::kTrialNotLaunched);
    EXPECT_NE(r.reason.find("--meshtrain"), std::string::npos) << r.reason;
    EXPECT_FALSE(r.run);
  }
  EXPECT_EQ(trial->winner(), nullptr);
  EXPECT_NE(out.find("not launched"), std::string::npos) << out;
  EXPECT_NE(out.find("No trial ran to its end"), std::string::npos) << out;
}

TEST(LocalTrials, NodesThatAreNotThePlansAreRefusedBeforeAnythingRuns) {
  const fs::path tmp = test::temp_dir("local-trials-nodes");
  const fs::path db = tmp / "runs.db";
  EXPECT_EQ(meshwork(with(kPlanFlags, {"--try", "2", "--local", "--nproc-per-node", "4", "--db", db.string()}), tmp), 2);
  EXPECT_NE(test::read_text(tmp / "err").find("--nproc-per-node: 4: the plan's --gpus-per-node 2"), std::string::npos)
      << test::read_text(tmp / "err");
  EXPECT_EQ(meshwork(with(kPlanFlags, {"--try", "2", "--db", db.string()}), tmp), 2);
  EXPECT_NE(test::read_text(tmp / "err").find("give the nodes to try the shapes on"), std::string::npos)
      << test::read_text(tmp / "err");
  EXPECT_EQ(meshwork(with(kPlanFlags, {"--try", "2", "--local", "--export", "accelerate"}), tmp), 2);
  EXPECT_FALSE(fs::exists(db));  // nothing was stored
  // Without --try, the plan's own refusals stay as they were.
  EXPECT_EQ(meshwork(with(kPlanFlags, {"--local"}), tmp), 2);
  EXPECT_EQ(meshwork(with(kPlanFlags, {"--steps", "3"}), tmp), 2);
}

}  // namespace
}  // namespace meshwork::remote
