// Stored runs as the fit sees them (core/store/run_observations.h): a real SQLite store holding
// runs in meshtrain's own line format whose compute_s and comm_s are known multiples of the
// estimator's terms, so what the store gives back and what it predicts have closed forms.
#include "core/store/run_observations.h"

#include <gtest/gtest.h>

#include "core/mesh_json.h"
#include "core/store/calibration_store.h"
#include "tests/store/test_util.h"

using namespace meshwork;
using namespace meshwork::store;
using meshwork::store::testing::TempDir;

namespace {

constexpr double kCompute = 1.5, kTp = 2.5, kRep = 0.5, kFsdp = 1.25, kEp = 3.0;

MeshShape shape(int r, int s, int c, int t) {
  MeshShape m;
  m.set(Axis::dp_replicate, r);
  m.set(Axis::dp_shard, s);
  m.set(Axis::cp, c);
  m.set(Axis::tp, t);
  return m;
}

nlohmann::json config_of(const MeshShape& m, const std::string& model = "tiny") {
  return {{"name", "fit"},
          {"model", model},
          {"mesh", to_json(m)},
          {"training",
           {{"steps", 6}, {"seq_len", 256}, {"global_batch", 8}, {"micro_batch", 1}, {"precision", "fp32"},
            {"device", "cpu"}}}};
}

// The estimator's terms for the shape on one node of 4 CPU ranks, by hand (not through the store).
TimeEstimate formula(const MeshShape& m, const std::string& model = "tiny") {
  TimeQuery q;
  q.model = *load_model_spec(model);
  q.shape = m;
  q.gpus_per_node = 4;
  q.training.seq_len = 256;
  q.training.micro_batch = 1;
  q.training.global_batch = 8;
  q.training.precision = Precision::fp32;
  q.hardware = HardwareModel::cpu();
  return estimate_time(q);
}

// A run on `host` (every rank on node 0) whose steps 1.. measured the formula times the factors
// above; step 0 (warm-up) measured ten times that, which the observation must leave out.
RunId store_run(RunStore& s, const MeshShape& m, const std::string& host, const std::string& status = "ok",
                int64_t steps = 6, const nlohmann::json& cluster = nlohmann::json::object(),
                const std::string& model = "tiny") {
  const nlohmann::json config = config_of(m, model);
  auto id = s.create_run("fit " + m.compact(), config, cluster);
  EXPECT_TRUE(id.ok());
  const TimeEstimate e = formula(m, model);
  auto term = [&](FitTerm t) { return e.term_s[static_cast<int>(t)]; };
  const int world = static_cast<int>(m.world_size());
  for (int r = 0; r < world; ++r) {
    std::string lines;
    StartRecord st;
    st.rank = r;
    st.world = world;
    st.node = 0;
    st.host = host;
    st.pid = 100 + r;
    st.time = 999;
    st.mesh = m;
    st.config = config;
    lines += to_json_line(st) + "\n";
    for (int64_t step = 0; step < steps; ++step) {
      StepRecord sr = meshwork::store::testing::step_record(r, step, 3.0);
      const double warm = step == 0 ? 10.0 : 1.0;
      sr.compute_s = warm * kCompute * term(FitTerm::compute);
      sr.comm_s = {};
      sr.comm_s[Axis::tp] = warm * kTp * term(FitTerm::tp);
      sr.comm_s[Axis::dp_replicate] = warm * kRep * term(FitTerm::dp_replicate);
      sr.comm_s[Axis::dp_shard] = warm * kFsdp * term(FitTerm::fsdp);
      sr.comm_ep_s = warm * kEp * term(FitTerm::ep);  // 0 without ep
      sr.step_s = sr.compute_s + sr.comm_ep_s;
      for (double c : sr.comm_s) sr.step_s += c;
      lines += to_json_line(sr) + "\n";
    }
    if (!status.empty()) {
      EndRecord end;
      end.rank = r;
      end.status = status;
      end.time = 2000;
      lines += to_json_line(end) + "\n";
    }
    EXPECT_TRUE(s.ingest_chunk(*id, "metrics-rank" + std::to_string(r), 0, lines).ok());
  }
  return *id;
}

}  // namespace

TEST(RunObservations, MeasuredMeansLeaveTheWarmUpStepOut) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  const MeshShape m = shape(2, 2, 1, 1);
  const RunId id = store_run(**s, m, "alpha");
  auto o = load_observation(s->get(), id);
  ASSERT_TRUE(o.ok()) << o.error().message();
  const TimeEstimate e = formula(m);
  EXPECT_NEAR(o->measured.compute_s, kCompute * e.compute_s, 1e-12);
  EXPECT_NEAR(o->measured.comm_s[Axis::dp_replicate],
              kRep * e.term_s[static_cast<int>(FitTerm::dp_replicate)], 1e-12);
  EXPECT_NEAR(o->measured.comm_s[Axis::dp_shard], kFsdp * e.term_s[static_cast<int>(FitTerm::fsdp)],
              1e-12);
  EXPECT_EQ(o->measured.steps, 5);  // steps 1..5
  // The query the store built is the one the planner would build for the run.
  ASSERT_TRUE(o->query);
  EXPECT_EQ(o->query->shape.compact(), m.compact());
  EXPECT_EQ(o->query->gpus_per_node, 4);
  EXPECT_EQ(o->query->training.global_batch, 8);
  EXPECT_EQ(o->query->training.seq_len, 256);
}

// A mixture of experts' all-to-all ("comm_s.ep", not an axis of the mesh) is measured too, so
// that the fit's ep term learns from stored runs and not only from a calibration's split steps.
TEST(RunObservations, TheExpertAllToAllIsMeasuredForTheFit) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  MeshShape moe = shape(1, 4, 1, 1);
  moe.ep = 4;
  const RunId id = store_run(**s, moe, "alpha", "ok", 6, nlohmann::json::object(), "olmoe-1b-7b");
  auto o = load_observation(s->get(), id);
  ASSERT_TRUE(o.ok()) << o.error().message();
  const TimeEstimate e = formula(moe, "olmoe-1b-7b");
  ASSERT_GT(e.term_s[static_cast<int>(FitTerm::ep)], 0.0);
  EXPECT_NEAR(o->measured.comm_ep_s, kEp * e.term_s[static_cast<int>(FitTerm::ep)], 1e-12);
  EXPECT_NEAR(o->measured.comm_s[Axis::dp_shard], kFsdp * e.term_s[static_cast<int>(FitTerm::fsdp)], 1e-12);
  EXPECT_EQ(o->query->shape.ep, 4);
  // A dense run has no all-to-all: 0, not absent data read as a time.
  const RunId dense = store_run(**s, shape(1, 4, 1, 1), "alpha");
  auto d = load_observation(s->get(), dense);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->measured.comm_ep_s, 0.0);
}

TEST(RunObservations, RunsThatCannotBeJudgedSayWhy) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  const RunId running = store_run(**s, shape(4, 1, 1, 1), "alpha", "");
  auto o = load_observation(s->get(), running);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message(), "run " + std::to_string(running) +
                                     " 'fit 4x1x1x1': running: predicted and measured are compared once a run has finished ok");
  const RunId short_run = store_run(**s, shape(4, 1, 1, 1), "alpha", "ok", 1);
  auto o2 = load_observation(s->get(), short_run);
  ASSERT_FALSE(o2.ok());
  EXPECT_EQ(o2.error().message(), "run " + std::to_string(short_run) +
                                      " 'fit 4x1x1x1': 1 step(s): at least 2 steps (the first is warm-up)");
}

TEST(RunObservations, TheClusterIsTheNodeSetAndRunsAreGroupedByIt) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  const RunId a1 = store_run(**s, shape(4, 1, 1, 1), "alpha");
  const RunId a2 = store_run(**s, shape(1, 1, 1, 4), "alpha");
  const RunId b1 = store_run(**s, shape(4, 1, 1, 1), "beta");  // the node was replaced
  store_run(**s, shape(2, 1, 1, 2), "alpha", "failed");       // not a step time to learn from
  auto info_a = (*s)->get_run(a1);
  auto info_b = (*s)->get_run(b1);
  auto na = run_node_set(s->get(), a1, *info_a);
  auto nb = run_node_set(s->get(), b1, *info_b);
  ASSERT_TRUE(na.ok() && nb.ok());
  ASSERT_EQ(na->nodes.size(), 1u);
  EXPECT_EQ(na->nodes[0].host, "alpha");
  EXPECT_EQ(na->nodes[0].devices, 4);
  EXPECT_NE(na->node_set_id(), nb->node_set_id());

  auto all = load_observations(s->get(), "");  // the cluster with the most runs: alpha's
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->cluster, na->node_set_id());
  ASSERT_EQ(all->runs.size(), 2u);
  EXPECT_EQ(all->runs[0].run, a2);  // newest first
  EXPECT_EQ(all->runs[1].run, a1);
  auto beta = load_observations(s->get(), nb->node_set_id());
  ASSERT_TRUE(beta.ok());
  ASSERT_EQ(beta->runs.size(), 1u);
  EXPECT_EQ(beta->runs[0].run, b1);
  auto none = load_observations(s->get(), "0000000000000000");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->runs.empty());
}

TEST(RunObservations, ARunIsPredictedFromTheOtherRunsOfItsCluster) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  store_run(**s, shape(4, 1, 1, 1), "alpha");
  store_run(**s, shape(1, 1, 1, 4), "alpha");
  store_run(**s, shape(1, 4, 1, 1), "alpha");
  store_run(**s, shape(2, 1, 1, 2), "beta");  // another cluster: not learnt from
  const RunId target = store_run(**s, shape(2, 2, 1, 1), "alpha");
  auto p = predict_run(s->get(), target);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->fitted_runs, 3);
  EXPECT_FALSE(p->calibrated);
  EXPECT_EQ(p->basis(), "defaults + fit of 3 runs");
  // Every term the others measured carries the same factor, so the prediction made from them
  // alone equals what the run measured (fsdp n=2 and dp_replicate n=2 from their n=4 factors).
  EXPECT_NEAR(p->check.predicted_step_s, p->check.measured_step_s, 1e-9 * p->check.measured_step_s);
  EXPECT_NEAR(p->check.predicted_compute_s, p->check.measured_compute_s, 1e-9 * p->check.measured_compute_s);
  for (Axis a : kAxes)
    EXPECT_NEAR(p->check.predicted_comm_s[a], p->check.measured_comm_s[a], 1e-9)
        << axis_name(a);
  EXPECT_TRUE(p->predicted.compute_fitted);
  EXPECT_TRUE(p->predicted.comm_fitted[Axis::dp_replicate]);

  // Without other runs: the defaults alone, which the error then shows.
  TempDir lone_dir;
  auto lone = RunStore::open(lone_dir / "runs.db");
  ASSERT_TRUE(lone.ok());
  const RunId only = store_run(**lone, shape(2, 2, 1, 1), "alpha");
  auto q = predict_run(lone->get(), only);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->basis(), "defaults");
  EXPECT_NEAR(q->check.predicted_compute_s, formula(shape(2, 2, 1, 1)).compute_s, 1e-12);
  EXPECT_NEAR(PredictionCheck::error(q->check.predicted_compute_s, q->check.measured_compute_s), 1 / kCompute - 1,
              1e-9);
}

TEST(RunObservations, TheCalibrationOfTheRunsNodesIsTheBase) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  const RunId id = store_run(**s, shape(4, 1, 1, 1), "alpha");
  Calibration c;
  c.fingerprint.device = DeviceKind::cpu;
  c.fingerprint.nodes = {{"alpha", 4, "cpu", 2}};
  c.fingerprint.links = {"intra_node"};
  c.measured_at = "2026-11-27T10:00:00Z";
  c.matmul = {{Precision::fp32, 1, 4, 7e9}};
  c.step_efficiency = 0.5;
  Calibration other = c;
  other.fingerprint.nodes = {{"beta", 4, "cpu", 2}};
  other.matmul = {{Precision::fp32, 1, 4, 1e9}};
  ASSERT_TRUE(save_calibration(**s, c).ok());
  ASSERT_TRUE(save_calibration(**s, other).ok());  // newer, but another node set
  auto p = predict_run(s->get(), id);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->calibrated);
  EXPECT_EQ(p->basis(), "calibration");
  EXPECT_TRUE(p->predicted.compute_calibrated);
  // compute = tokens x flops per token / (world x rate x efficiency), the calibrated rate.
  const TimeEstimate e = formula(shape(4, 1, 1, 1));
  EXPECT_NEAR(p->predicted.compute_s, e.tokens_per_step * e.hardware_flops_per_token / (4 * 7e9 * 0.5), 1e-12);
}

TEST(RunObservations, LaunchedNodesGoByTheLaunchersNamesSlurmNodesByTheirOwn) {
  TempDir dir;
  auto s = RunStore::open(dir / "runs.db");
  ASSERT_TRUE(s.ok());
  // Over SSH: the launch record's host (what `meshwork calibrate` over SSH records too), not the
  // name the node gives itself; "local" keeps the node's own name.
  const nlohmann::json ssh = {{"launch", {{"nodes", {{{"host", "gpu-a"}, {"slots", 4}, {"run_dir", "/r"}}}}}}};
  const nlohmann::json local = {{"launch", {{"nodes", {{{"host", "local"}, {"slots", 4}, {"run_dir", "/r"}}}}}}};
  const nlohmann::json slurm = {{"launch", {{"nodes", {{{"host", "login"}, {"slots", 4}, {"run_dir", "/r"}}}}}},
                                {"slurm", {{"job_id", "7"}}}};
  const RunId a = store_run(**s, shape(4, 1, 1, 1), "ip-10-0-0-1", "ok", 6, ssh);
  const RunId b = store_run(**s, shape(4, 1, 1, 1), "ip-10-0-0-1", "ok", 6, local);
  const RunId c = store_run(**s, shape(4, 1, 1, 1), "n17", "ok", 6, slurm);
  auto host_of = [&](RunId id) {
    auto info = (*s)->get_run(id);
    auto n = run_node_set(s->get(), id, *info);
    return n.ok() && n->nodes.size() == 1 ? n->nodes[0].host : std::string("?");
  };
  EXPECT_EQ(host_of(a), "gpu-a");
  EXPECT_EQ(host_of(b), "ip-10-0-0-1");
  EXPECT_EQ(host_of(c), "n17");
}
