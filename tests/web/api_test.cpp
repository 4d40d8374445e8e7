// The web view's JSON API on a real SQLite store (no HTTP: web/api.h is the whole rule book).
#include <gtest/gtest.h>

#include "core/store/compare_frame.h"
#include "core/store/run_frame.h"
#include "core/store/run_observations.h"
#include "tests/web/web_fixture.h"
#include "web/api.h"

namespace meshwork::web {
namespace {

using testing::RunSpec;
using testing::TempDir;
using testing::shape;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "runs.db";
    auto w = store::RunStore::open(db_);
    ASSERT_TRUE(w.ok()) << w.error().message();
    writer_ = std::move(*w);
    a_ = {"alpha", shape(1, 2, 1, 2), 2, 1e-3, 1.0};
    b_ = {"beta <script>alert(1)</script>", shape(2, 2, 1, 1), 2, 3e-4, 1.1};
    c_ = {"gamma", shape(1, 4, 1, 1), 2, 1e-3, 0.9};
    id_a_ = testing::finished_run(*writer_, a_, 300);
    id_b_ = testing::finished_run(*writer_, b_, 300);
    id_c_ = testing::finished_run(*writer_, c_, 200, "failed",
                                  "exited 137 (killed: out of memory)\nTraceback: line 1\nline 2");
    ASSERT_NE(id_a_, 0);
    ASSERT_NE(id_b_, 0);
    ASSERT_NE(id_c_, 0);
    store::RunStore::Options ro;
    ro.read_only = true;
    auto r = store::RunStore::open(db_, ro);
    ASSERT_TRUE(r.ok()) << r.error().message();
    api_ = std::make_unique<Api>(std::move(*r));
  }

  ApiReply get(const std::string& path, const Params& p = {}) { return api_->get(path, p); }

  TempDir dir_;
  std::filesystem::path db_;
  std::unique_ptr<store::RunStore> writer_;
  std::unique_ptr<Api> api_;
  RunSpec a_, b_, c_;
  store::RunId id_a_ = 0, id_b_ = 0, id_c_ = 0;
};

TEST_F(ApiTest, RunsListShowsEveryRunAsTheWorkbenchDoes) {
  const ApiReply r = get("/runs");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["runs"].size(), 3u);
  auto list = writer_->list_runs();
  ASSERT_TRUE(list.ok());
  for (size_t i = 0; i < list->size(); ++i) {
    const auto& s = (*list)[i];
    const auto& j = r.body["runs"][i];
    EXPECT_EQ(j["id"], s.id);
    EXPECT_EQ(j["name"], s.name);
    EXPECT_EQ(j["shape_text"], s.shape->compact());
    EXPECT_EQ(j["steps"], s.steps);
    EXPECT_EQ(j["status"], s.status);
    // The run's throughput: rank 0's tokens/s times the data-parallel replicas.
    ASSERT_TRUE(j["tokens_per_s"].is_number());
    EXPECT_DOUBLE_EQ(j["tokens_per_s"].get<double>(),
                     *s.tokens_per_s * s.shape->group_size(GroupKind::dp));
  }
  EXPECT_EQ(r.body["runs"][1]["name"], "beta <script>alert(1)</script>");  // data, escaped by the page
}

TEST_F(ApiTest, RunInfoHasTheMeshOverItsNodesAndTheRootCause) {
  const ApiReply r = get("/runs/" + std::to_string(id_a_));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const auto& layout = r.body["layout"];
  EXPECT_EQ(layout["ranks_total"], 4);
  ASSERT_EQ(layout["nodes"].size(), 2u);
  EXPECT_EQ(layout["nodes"][0]["host"], "node0");
  EXPECT_EQ(layout["nodes"][0]["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(layout["nodes"][1]["ranks"], nlohmann::json({2, 3}));
  // 1x2x1x2: rank = (s * cp + c) * tp + t, so rank 3 sits at dp_shard 1, tp 1.
  EXPECT_EQ(layout["coords"][3], nlohmann::json({0, 1, 0, 1}));
  EXPECT_EQ(r.body["config"]["training"]["lr"], 1e-3);
  EXPECT_TRUE(r.body["root_cause"].is_null());
  // Capacity per rank: a CPU node's memory over its ranks (2 nodes, 4 ranks).
  EXPECT_DOUBLE_EQ(r.body["capacity_bytes"].get<double>(), 64.0 * (1 << 30) / 2);

  const ApiReply failed = get("/runs/" + std::to_string(id_c_));
  ASSERT_EQ(failed.status, 200);
  EXPECT_EQ(failed.body["run"]["status"], "failed");
  // The store names the rank that ended the run first (docs/store.md).
  EXPECT_EQ(failed.body["root_cause"].get<std::string>(),
            "The run failed: rank 3: exited 137 (killed: out of memory)\nTraceback: line 1\nline 2");
}

TEST_F(ApiTest, FrameHasWhatTheWorkbenchDrawsFromTheSameRead) {
  const ApiReply r = get("/runs/" + std::to_string(id_a_) + "/frame", {{"pixels", "120"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  auto f = store::load_run_frame(writer_.get(), id_a_, -1, std::nullopt, 120, 0);
  ASSERT_TRUE(f && !f->error);
  ASSERT_FALSE(f->loss.empty());
  ASSERT_EQ(r.body["loss"].size(), f->loss.size());
  for (size_t i = 0; i < f->loss.size(); ++i) {
    EXPECT_EQ(r.body["loss"][i][0].get<double>(), f->loss[i].x);
    EXPECT_EQ(r.body["loss"][i][1].get<double>(), f->loss[i].y);
  }
  EXPECT_LE(f->loss.size(), 2u * 120 + 2);  // decimated for 120 columns
  EXPECT_EQ(r.body["source_points"], 300);
  // Only the axes that communicate (dp_shard 2, tp 2).
  EXPECT_EQ(r.body["comm"].size(), 2u);
  EXPECT_TRUE(r.body["comm"].contains("dp_shard"));
  EXPECT_TRUE(r.body["comm"].contains("tp"));
  EXPECT_EQ(r.body["mem"].size(), 4u);
  EXPECT_EQ(r.body["mem_ranks"], nlohmann::json({0, 1, 2, 3}));
  // A zoom re-reads the range at full resolution: every step of 100..140.
  const ApiReply z = get("/runs/" + std::to_string(id_a_) + "/frame",
                         {{"pixels", "800"}, {"x_min", "100"}, {"x_max", "140"}});
  ASSERT_EQ(z.status, 200);
  ASSERT_EQ(z.body["loss"].size(), 41u);
  EXPECT_EQ(z.body["loss"].front()[0], 100.0);
  EXPECT_EQ(z.body["loss"].back()[0], 140.0);
}

TEST_F(ApiTest, SeriesIsTheStoresDecimatedQuery) {
  const ApiReply r = get("/runs/" + std::to_string(id_b_) + "/series",
                         {{"key", "step_s"}, {"agg", "max"}, {"x", "tokens"}, {"pixels", "64"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  store::SeriesQuery q;
  q.runs = {id_b_};
  q.key = "step_s";
  q.aggregate = store::Aggregate::max;
  q.x = store::XAxis::tokens;
  q.pixels = 64;
  auto s = writer_->query_series(q);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(r.body["points"].size(), (*s)[0].points.size());
  EXPECT_EQ(r.body["points"].back()[0].get<double>(), (*s)[0].points.back().x);
  EXPECT_EQ(r.body["source_points"], (*s)[0].source_points);
}

TEST_F(ApiTest, CompareOverlaysRunsWithCommBarsAndTheConfigDiff) {
  const std::string runs = std::to_string(id_a_) + "," + std::to_string(id_b_) + "," + std::to_string(id_c_);
  const ApiReply r = get("/compare", {{"runs", runs}, {"key", "loss"}, {"pixels", "200"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["series"].size(), 3u);
  EXPECT_EQ(r.body["series"][2]["run"], id_c_);
  // Compare reads the mean over ranks: the points of every rank (4 ranks x 200 steps).
  EXPECT_EQ(r.body["series"][2]["source_points"], 4 * 200);
  ASSERT_EQ(r.body["comm"].size(), 3u);
  // Per-axis seconds per step as the runs recorded them: dp_shard 0.02, tp 0.04, compute 0.1.
  EXPECT_NEAR(r.body["comm"][0]["mean"]["dp_shard"].get<double>(), 0.02, 1e-12);
  EXPECT_NEAR(r.body["comm"][0]["mean"]["tp"].get<double>(), 0.04, 1e-12);
  EXPECT_NEAR(r.body["comm"][0]["mean"]["compute"].get<double>(), 0.1, 1e-12);
  EXPECT_TRUE(r.body["comm"][0]["exact"].get<bool>());
  std::map<std::string, bool> differs;
  for (const auto& d : r.body["diff"]) differs[d["key"]] = d["differs"];
  EXPECT_TRUE(differs.at("training.lr"));
  EXPECT_TRUE(differs.at("mesh.dp_shard"));
  EXPECT_FALSE(differs.at("model"));
  EXPECT_EQ(differs.count("name"), 0u);  // runs are told apart by their names anyway
}

TEST_F(ApiTest, PredictionIsPredictRunsAgainstWhatTheRunMeasured) {
  // (The workbench's read-write connection asks first, as it does when it shows the run.)
  auto p = store::predict_run(writer_.get(), id_a_);
  ASSERT_TRUE(p.ok()) << p.error().message();
  const ApiReply r = get("/runs/" + std::to_string(id_a_) + "/prediction");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const PredictionCheck& c = p->check;
  const nlohmann::json& b = r.body;
  EXPECT_EQ(b["run"], id_a_);
  EXPECT_TRUE(b["available"].get<bool>());
  EXPECT_EQ(b["basis"], p->basis());
  EXPECT_EQ(b["calibrated"], p->calibrated);
  EXPECT_FALSE(b["calibrated"].get<bool>());  // no calibration stored
  // Fitted on the other finished run of the same nodes (beta; gamma failed).
  EXPECT_EQ(b["fitted_runs"], 1);
  EXPECT_EQ(b["basis"], "defaults + fit of 1 run");
  EXPECT_DOUBLE_EQ(b["predicted"]["step_s"].get<double>(), c.predicted_step_s);
  EXPECT_DOUBLE_EQ(b["predicted"]["compute_s"].get<double>(), c.predicted_compute_s);
  EXPECT_DOUBLE_EQ(b["measured"]["step_s"].get<double>(), c.measured_step_s);
  EXPECT_DOUBLE_EQ(b["measured"]["compute_s"].get<double>(), c.measured_compute_s);
  EXPECT_EQ(b["measured"]["steps"], p->measured.steps);
  // What the run wrote (web_fixture.h): compute 0.1, dp_shard 0.02, tp 0.04 every step; the
  // measured step is their sum.
  EXPECT_NEAR(b["measured"]["compute_s"].get<double>(), 0.1, 1e-12);
  EXPECT_NEAR(b["measured"]["comm_s"]["dp_shard"].get<double>(), 0.02, 1e-12);
  EXPECT_NEAR(b["measured"]["comm_s"]["tp"].get<double>(), 0.04, 1e-12);
  EXPECT_EQ(b["measured"]["comm_s"]["dp_replicate"].get<double>(), 0.0);
  EXPECT_NEAR(b["measured"]["step_s"].get<double>(), 0.16, 1e-12);
  auto rel = [](double pred, double meas) { return (pred - meas) / meas; };
  EXPECT_DOUBLE_EQ(b["error"]["step_s"].get<double>(), rel(c.predicted_step_s, c.measured_step_s));
  EXPECT_DOUBLE_EQ(b["error"]["compute_s"].get<double>(), rel(c.predicted_compute_s, c.measured_compute_s));
  for (Axis a : kAxes) {
    const std::string name(axis_name(a));
    EXPECT_DOUBLE_EQ(b["predicted"]["comm_s"][name].get<double>(), c.predicted_comm_s[a]) << name;
    EXPECT_DOUBLE_EQ(b["measured"]["comm_s"][name].get<double>(), c.measured_comm_s[a]) << name;
    if (c.measured_comm_s[a] > 0)
      EXPECT_DOUBLE_EQ(b["error"]["comm_s"][name].get<double>(), rel(c.predicted_comm_s[a], c.measured_comm_s[a])) << name;
    else
      EXPECT_TRUE(b["error"]["comm_s"][name].is_null()) << name;  // nothing measured: no error
  }
  EXPECT_GT(b["predicted"]["comm_s"]["tp"].get<double>(), 0.0);
  EXPECT_EQ(b["predicted"]["comm_s"]["cp"].get<double>(), 0.0);

  // Runs predict_run cannot judge: 200, not available, and its words why.
  const ApiReply failed = get("/runs/" + std::to_string(id_c_) + "/prediction");
  ASSERT_EQ(failed.status, 200) << failed.body.dump();
  auto refused = store::predict_run(writer_.get(), id_c_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(failed.body, nlohmann::json({{"available", false}, {"reason", refused.error().message()}}));
  RunSpec live{"live", shape(1, 2, 1, 1), 2, 1e-3, 1.0};
  const store::RunId running = testing::create_run(*writer_, live);
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(testing::add_steps(*writer_, running, live, 0, 9, offsets));
  const ApiReply still = get("/runs/" + std::to_string(running) + "/prediction");
  ASSERT_EQ(still.status, 200) << still.body.dump();
  EXPECT_FALSE(still.body["available"].get<bool>());
  EXPECT_EQ(still.body["reason"], store::predict_run(writer_.get(), running).error().message());
  EXPECT_NE(still.body["reason"].get<std::string>().find("running"), std::string::npos);
}

// `meshwork serve` opens the store read-only; a store no calibration was ever saved to (nor any
// prediction asked of by a read-write connection) has no calibrations table yet, which must read
// as "no calibration", not as a store error.
TEST_F(ApiTest, PredictionOnAReadOnlyStoreWithoutCalibrations) {
  const ApiReply r = get("/runs/" + std::to_string(id_a_) + "/prediction");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_TRUE(r.body["available"].get<bool>());
  EXPECT_EQ(r.body["basis"], "defaults + fit of 1 run");
  auto p = store::predict_run(writer_.get(), id_a_);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_DOUBLE_EQ(r.body["predicted"]["step_s"].get<double>(), p->check.predicted_step_s);
}

TEST_F(ApiTest, BadRequestsGetAClearMessage) {
  struct Case {
    std::string path;
    Params params;
    int status;
    std::string error;
  };
  const std::string a = std::to_string(id_a_);
  const std::vector<Case> cases = {
      {"/runs/abc", {}, 400, "run: abc: a run id: a whole number >= 1"},
      {"/runs/0", {}, 400, "run: 0: a run id: a whole number >= 1"},
      {"/runs/99999", {}, 404, "run: 99999: no such run in the store"},
      {"/runs/99999/frame", {}, 404, "run: 99999: no such run in the store"},
      {"/runs/" + a + "/frame", {{"pixels", "5"}}, 400, "pixels: 5: a whole number from 16 to 4096"},
      {"/runs/" + a + "/frame", {{"pixels", "1e9"}}, 400, "pixels: 1e9: a whole number from 16 to 4096"},
      {"/runs/" + a + "/frame", {{"x_min", "nan"}}, 400, "x_min: nan: a finite number"},
      {"/runs/" + a + "/frame", {{"x_min", "9"}, {"x_max", "3"}}, 400, "x_max: 3: at least x_min"},
      {"/runs/" + a + "/series", {{"key", "loss; DROP TABLE runs"}}, 400,
       "key: loss; DROP TABLE runs: a metric key: 1-64 of A-Z a-z 0-9 _ . -"},
      {"/runs/" + a + "/series", {{"x", "weeks"}}, 400, "x: weeks: one of step, tokens, time"},
      {"/runs/" + a + "/series", {{"agg", "median"}}, 400, "agg: median: one of none, mean, min, max, sum"},
      {"/compare", {}, 400, "runs: 1 to 10 run ids, comma-separated (runs=3,4,7)"},
      {"/compare", {{"runs", a + "," + a}}, 400, "runs: " + a + "," + a + ": each run once"},
      {"/compare", {{"runs", "1,2,3,4,5,6,7,8,9,10,11"}}, 400, "runs: 1,2,3,4,5,6,7,8,9,10,11: at most 10 runs"},
      {"/compare", {{"runs", a + ",x"}}, 400, "runs: x: a run id: a whole number >= 1"},
      {"/runs/" + a + "/files", {}, 404,
       "path: /api/runs/" + a +
           "/files: one of /api/runs, /api/runs/ID, /api/runs/ID/frame, /api/runs/ID/series, "
           "/api/runs/ID/prediction, /api/runs/ID/health, /api/runs/ID/expert-load, /api/compare (docs/web.md)"},
      {"/runs/99999/prediction", {}, 404, "run: 99999: no such run in the store"},
      {"/runs/99999/health", {}, 404, "run: 99999: no such run in the store"},
      {"/runs/abc/health", {}, 400, "run: abc: a run id: a whole number >= 1"},
      {"/runs/" + a + "/health", {{"hang_after", "0"}}, 400, "hang_after: 0: seconds, 1 to 604800"},
      {"/runs/" + a + "/health", {{"hang_after", "inf"}}, 400, "hang_after: inf: a finite number"},
      {"/runs/abc/prediction", {}, 400, "run: abc: a run id: a whole number >= 1"},
  };
  for (const Case& c : cases) {
    const ApiReply r = get(c.path, c.params);
    EXPECT_EQ(r.status, c.status) << c.path;
    EXPECT_EQ(r.body.value("error", std::string()), c.error) << c.path;
  }
  // A long value is cut in the message: the error never echoes a whole request back.
  const ApiReply r = get("/runs/" + a + "/series", {{"key", std::string(5000, 'k')}});
  EXPECT_EQ(r.status, 400);
  EXPECT_LT(r.body["error"].get<std::string>().size(), 200u);
}

TEST_F(ApiTest, HealthNamesTheRankAHungRunWaitsForAsMeshworkDiagnoseDoes) {
  const store::RunId hung = testing::hung_run(*writer_);
  ASSERT_NE(hung, 0);
  const ApiReply r = get("/runs/" + std::to_string(hung) + "/health");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const nlohmann::json& j = r.body;
  EXPECT_EQ(j["state"], "hang");
  EXPECT_EQ(j["run"], hung);
  EXPECT_EQ(j["status"], "running");
  ASSERT_TRUE(j["follower"].is_number());
  ASSERT_EQ(j["culprits"].size(), 1u) << j.dump(2);
  const nlohmann::json& c = j["culprits"][0];
  EXPECT_EQ(c["rank"], 3);
  EXPECT_EQ(c["node"], 1);
  EXPECT_EQ(c["host"], "node1");
  EXPECT_EQ(c["pid"], 4003);
  EXPECT_EQ(c["process"], "stopped");
  EXPECT_EQ(c["phase"], "backward layer 1");
  EXPECT_EQ(c["waited_by"], nlohmann::json({1}));
  ASSERT_EQ(j["waiting"].size(), 1u);
  EXPECT_EQ(j["waiting"][0]["axis"], "dp_shard");
  EXPECT_EQ(j["waiting"][0]["op"], "all_gather");
  EXPECT_EQ(j["waiting"][0]["seq"], 12);
  EXPECT_EQ(j["waiting"][0]["missing"], nlohmann::json({3}));
  const std::string summary = j["summary"];
  EXPECT_NE(summary.find("rank 3 (node1, pid 4003) never entered it: stopped, last in backward layer 1"),
            std::string::npos)
      << summary;

  // The same JSON as `meshwork diagnose --json` (store::run_health), but for what the clock moves.
  auto same = store::run_health(*writer_, hung, static_cast<double>(std::time(nullptr)));
  ASSERT_TRUE(same.ok()) << same.error().message();
  nlohmann::json cli = same->to_json(hung), web = j;
  for (nlohmann::json* x : {&cli, &web})
    for (const char* moving : {"silent_s", "follower", "summary"}) x->erase(moving);
  EXPECT_EQ(web, cli);

  // A finished run is healthy; T given that no run has been silent for is still a hang.
  const ApiReply ok = get("/runs/" + std::to_string(id_a_) + "/health");
  ASSERT_EQ(ok.status, 200) << ok.body.dump();
  EXPECT_EQ(ok.body["state"], "healthy");
  EXPECT_TRUE(ok.body["culprits"].empty());
  const ApiReply week = get("/runs/" + std::to_string(hung) + "/health", {{"hang_after", "604800"}});
  ASSERT_EQ(week.status, 200) << week.body.dump();
  EXPECT_EQ(week.body["threshold_s"], 604800.0);
  EXPECT_EQ(week.body["state"], "hang");
}

TEST_F(ApiTest, VersionsMoveWhenPointsArrive) {
  auto before = api_->versions();
  ASSERT_TRUE(before.ok());
  const int64_t dv = api_->data_version();
  RunSpec live{"live", shape(1, 2, 1, 1), 2, 1e-3, 1.0};
  const store::RunId id = testing::create_run(*writer_, live);
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(testing::add_steps(*writer_, id, live, 0, 9, offsets));
  EXPECT_NE(api_->data_version(), dv);  // another connection committed
  auto mid = api_->versions();
  ASSERT_TRUE(mid.ok());
  EXPECT_NE(mid->list, before->list);
  ASSERT_TRUE(testing::add_steps(*writer_, id, live, 10, 19, offsets));
  auto after = api_->versions();
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->runs.at(id), mid->runs.at(id));
  EXPECT_EQ(after->runs.at(id_a_), mid->runs.at(id_a_));  // the others did not move
  EXPECT_EQ(after->steps.at(id), 19);
}

}  // namespace
}  // namespace meshwork::web
