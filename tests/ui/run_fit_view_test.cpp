// "Learn from runs" in the workbench (issue 18), with real widgets on the offscreen platform over
// a real run store (a temporary SQLite file) holding finished runs in meshtrain's own line format:
// the ranks report this machine's hostname (what meshtrain reports for a node launched without
// SSH), and each step measured compute_s and comm_s that are known multiples of the estimator's
// terms for the run's shape. Then:
//   - the memory bar's step time is core's estimate_time() with the fit that core's fit_runs()
//     makes of load_observations() on the same store (computed here, not read from the UI), and
//     differs from the unfitted one; its tag says "fitted to N runs" and its tooltip names the
//     corrected terms; every planner row's step is core's estimate for that shape with the same
//     fit, its Basis column says so, and its tooltip says per term which were fitted;
//   - with a calibration of these nodes stored, the fit is made on the calibration's base and the
//     tag says "calibrated + fitted to N runs"; a new finished run is learnt when the store says
//     its runs changed;
//   - runs of another host teach nothing about this machine: no fit, "uncalibrated estimate";
//   - with 1 and 2 stored runs (fewer than the fit's unknowns plus one) nothing is fitted: the
//     planner shows the uncalibrated estimate with its stated uncertainty and why it is not
//     fitted, never a fit's "0 %" judged on its own run; with 5 the fit is used and its error is
//     each run predicted by the fit of the others;
//   - more CPU ranks on a node than it has cores is named in the planner and the editor.
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/calibration.h"
#include "core/mesh_json.h"
#include "core/metrics.h"
#include "core/parallel_layout.h"
#include "core/run_config.h"
#include "core/run_fit.h"
#include "core/store/calibration_store.h"
#include "core/store/run_observations.h"
#include "core/store/run_store.h"
#include "core/time_estimate.h"
#include "test_support.h"
#include "ui/calibration_model.h"
#include "ui/cluster_panel.h"
#include "ui/core_bridge.h"
#include "ui/format.h"
#include "ui/memory_panel.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_model.h"
#include "ui/planner_panel.h"
#include "ui/run_fit_model.h"
#include "ui/store_worker.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

// What the runs measured: these multiples of the formulas' terms.
constexpr double kCompute = 1.5, kTp = 2.5, kRep = 0.5, kFsdp = 1.25;
constexpr int kRanks = 2;  // one node, two CPU ranks (the workbench's local cluster below)

std::string hostname() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

MeshShape shape(int r, int s, int c, int t) {
  MeshShape m;
  m.set(Axis::dp_replicate, r);
  m.set(Axis::dp_shard, s);
  m.set(Axis::cp, c);
  m.set(Axis::tp, t);
  return m;
}

const ModelSpec& tiny() {
  static const ModelSpec spec = *load_model_spec("tiny");
  return spec;
}

// The plan's (and the runs') training: tiny, seq 64, batch 4 of 1, fp32 on the CPU.
RunConfig tiny_config(RunConfig c, const MeshShape& m) {
  c.name = "run-fit-test";
  c.model = "tiny";
  c.mesh = m;
  c.training.steps = 6;
  c.training.seq_len = 64;
  c.training.global_batch = 4;
  c.training.micro_batch = 1;
  c.training.precision = Precision::fp32;
  c.training.device = DeviceKind::cpu;
  return c;
}

nlohmann::json run_config_json(const MeshShape& m) {
  return {{"name", "fit " + m.compact()},
          {"model", "tiny"},
          {"mesh", to_json(m)},
          {"training",
           {{"steps", 6}, {"seq_len", 64}, {"global_batch", 4}, {"micro_batch", 1}, {"precision", "fp32"},
            {"device", "cpu"}}}};
}

// core's time query for `config` on one node of kRanks CPU ranks, with the defaults as hardware.
TimeQuery query_of(const RunConfig& config) {
  Placement placement;
  placement.world_size = kRanks;
  placement.ranks_per_node = kRanks;
  const LayoutCheck checked = ParallelLayout::check(config, &tiny(), placement);
  if (!checked.ok()) qFatal("shape %s: %s", config.mesh.compact().c_str(), checked.report.first_error().message().c_str());
  return checked.layout->time_query(tiny(), HardwareModel::for_device(DeviceKind::cpu));
}

// The node set of this machine with kRanks CPU ranks, as a run records it.
std::string local_node_set() {
  ClusterFingerprint f;
  f.device = DeviceKind::cpu;
  f.nodes = {{hostname(), kRanks, "cpu", 0}};
  return f.node_set_id();
}

// A finished run of shape `m` on `host` (both ranks on node 0), its steps 1.. measuring the
// formula's terms (defaults as the base) times the factors above; step 0, the warm-up, ten times
// that (the fit leaves it out).
store::RunId store_run(store::RunStore& s, const MeshShape& m, const std::string& host, double scale = 1.0) {
  const nlohmann::json config = run_config_json(m);
  auto id = s.create_run("fit " + m.compact(), config, nlohmann::json::object());
  if (!id) qFatal("create_run: %s", id.error().message().c_str());
  auto parsed = run_config_from_json(config);
  if (!parsed) qFatal("config: %s", parsed.error().message().c_str());
  TimeQuery q = query_of(*parsed);
  const TimeEstimate e = estimate_time(q);
  auto term = [&](FitTerm t) { return e.term_s[static_cast<int>(t)]; };
  for (int r = 0; r < kRanks; ++r) {
    std::string lines;
    StartRecord st;
    st.rank = r;
    st.world = kRanks;
    st.node = 0;
    st.host = host;
    st.pid = 100 + r;
    st.time = 999;
    st.mesh = m;
    st.config = config;
    lines += to_json_line(st) + "\n";
    for (int64_t step = 0; step < 6; ++step) {
      StepRecord sr;
      sr.rank = r;
      sr.step = step;
      sr.time = 1000.0 + static_cast<double>(step);
      sr.loss = 3.0;
      sr.lr = 1e-3;
      sr.grad_norm = 0.5;
      sr.tokens = 256;
      sr.tflops = 0.01;
      sr.mfu = 0.01;
      sr.mem_bytes = int64_t{1} << 26;
      sr.mem_peak_bytes = int64_t{1} << 27;
      const double warm = (step == 0 ? 10.0 : 1.0) * scale;
      sr.compute_s = warm * kCompute * term(FitTerm::compute);
      sr.comm_s = {};
      sr.comm_s[Axis::tp] = warm * kTp * term(FitTerm::tp);
      sr.comm_s[Axis::dp_replicate] = warm * kRep * term(FitTerm::dp_replicate);
      sr.comm_s[Axis::dp_shard] = warm * kFsdp * term(FitTerm::fsdp);
      sr.step_s = sr.compute_s;
      for (double c : sr.comm_s) sr.step_s += c;
      sr.tokens_per_s = 256 / sr.step_s;
      lines += to_json_line(sr) + "\n";
    }
    EndRecord end;
    end.rank = r;
    end.status = "ok";
    end.time = 2000;
    lines += to_json_line(end) + "\n";
    auto c = s.ingest_chunk(*id, "metrics-rank" + std::to_string(r), 0, lines);
    if (!c) qFatal("ingest: %s", c.error().message().c_str());
  }
  return *id;
}

std::unique_ptr<store::RunStore> open_store(const QString& db) {
  auto s = store::RunStore::open(db.toStdString());
  if (!s) qFatal("open: %s", s.error().message().c_str());
  return std::move(*s);
}

// What core fits from the store's runs of this machine's node set, on `base`.
std::shared_ptr<const RunFit> core_fit(const QString& db, const std::optional<Calibration>& base, int expect_runs) {
  auto s = open_store(db);
  auto set = store::load_observations(s.get(), local_node_set());
  if (!set) qFatal("load_observations: %s", set.error().message().c_str());
  if (static_cast<int>(set->runs.size()) != expect_runs)
    qFatal("%d observations, expected %d", static_cast<int>(set->runs.size()), expect_runs);
  auto fit = fit_runs_out_of_sample(set->runs, base);
  if (!fit) qFatal("fit_runs_out_of_sample: %s", fit.error().message().c_str());
  fit->cluster = set->cluster;
  return std::make_shared<const RunFit>(std::move(*fit));
}

// t = alpha + x / beta exactly at four sizes, x = the ring bytes of the tensor.
void add_collective(std::vector<CollectiveSample>& out, Collective op, LinkKind link, int n, double alpha, double beta) {
  for (double m : {4096.0, 65536.0, 1048576.0, 16777216.0})
    out.push_back({op, link, n, m, alpha + ring_bytes_sent(op, m, n) / beta});
}

// A calibration of this machine with kRanks ranks, as build_calibration() fits it from samples.
Calibration local_calibration() {
  ClusterFingerprint f;
  f.device = DeviceKind::cpu;
  f.nodes = {{hostname(), kRanks, "cpu", 2}};
  f.links = {"intra_node"};
  std::vector<MatmulSample> mm;
  for (Precision p : {Precision::fp32, Precision::bf16})
    for (int split : {1, 2}) {
      MatmulSample s;
      s.precision = p;
      s.threads = 1;
      s.ranks_per_node = kRanks;
      s.m = 128, s.n = 256 / split, s.k = 256;
      s.seconds = 2.0 * s.m * s.n * s.k / ((p == Precision::fp32 ? 12.5e9 : 4.25e9) / split);
      s.split = split;
      mm.push_back(s);
    }
  std::vector<CollectiveSample> cs;
  for (Collective op : kCollectives) {
    const int i = static_cast<int>(op);
    add_collective(cs, op, LinkKind::intra_node, kRanks, (1 + i) * 45e-6, (1 + 0.5 * i) * 1.25e9);
  }
  auto c = build_calibration(f, mm, cs, "2026-02-03T04:05:06Z");
  if (!c) qFatal("build_calibration: %s", c.error().message().c_str());
  // The calibration's own noise (its drift check and spread): the band its predictions carry.
  c->step_drift = 0.07;
  c->step_spread = 0.04;
  return *c;
}

// The plan's rows against core's estimate with `fit` (and `calibration`) shape by shape: the step
// time, the Basis column and its per-term tooltip.
void check_planner(PlannerModel* planner, const RunConfig& config, const std::shared_ptr<const RunFit>& fit,
                   const std::optional<Calibration>& calibration, const QString& tag) {
  QVERIFY(planner->rowCount() >= 3);
  for (int row = 0; row < planner->rowCount(); ++row) {
    const PlanRow& r = planner->row_at(row);
    const TimeEstimate& t = r.entry.time;
    RunConfig c = config;
    c.mesh = r.entry.shape;
    TimeQuery q = query_of(c);
    q.calibration = calibration;
    q.fit = fit;
    const TimeEstimate expected = estimate_time(q);
    const QString what = QString::fromStdString(r.entry.shape.compact());
    QVERIFY2(std::abs(t.step_s - expected.step_s) <= 1e-12 * expected.step_s,
             qPrintable(QStringLiteral("%1: step %2, core %3").arg(what).arg(t.step_s).arg(expected.step_s)));
    QCOMPARE(planner->index(row, PlannerModel::Basis).data().toString(), tag);
    // How far to trust it: core's band, shown beside the step time when there is one.
    QCOMPARE(t.step_band, expected.step_band);
    const QString step = planner->index(row, PlannerModel::StepTime).data().toString();
    QVERIFY2(step.contains(QStringLiteral("± ") + format_percent(expected.step_band)) == (expected.step_band > 0) &&
                 step.contains(QStringLiteral("±")) == (expected.step_band > 0),
             qPrintable(step));
    const QString tip = planner->index(row, PlannerModel::TokensPerS).data(Qt::ToolTipRole).toString();
    QCOMPARE(planner->index(row, PlannerModel::Basis).data(Qt::ToolTipRole).toString(), tip);
    const QString fitted = QStringLiteral(" × fit of %1 runs").arg(fit ? fit->runs : 0);
    const QString source = calibration && expected.compute_calibrated ? QStringLiteral("calibration") : QStringLiteral("defaults");
    QVERIFY2(tip.contains(QStringLiteral("compute: %1%2").arg(source, expected.compute_fitted ? fitted : QString())), qPrintable(tip));
    for (Axis a : kAxes) {
      if (!(expected.comm[a].collectives > 0 || expected.comm[a].seconds > 0)) continue;
      const QString axis = QString::fromStdString(std::string(axis_name(a)));
      QVERIFY2(tip.contains(axis + QStringLiteral(": ")), qPrintable(tip));
      QCOMPARE(tip.contains(axis + QStringLiteral(": calibration") + fitted) ||
                   tip.contains(axis + QStringLiteral(": defaults") + fitted),
               expected.comm_fitted[a]);
    }
    // The comm columns: the share of core's step each axis's collectives take.
    for (Axis a : kAxes) {
      const double shown =
          planner->index(row, PlannerModel::CommFirst + static_cast<int>(axis_index(a))).data(PlannerModel::ShareRole).toDouble();
      const double want = expected.step_s > 0 ? expected.comm[a].seconds / expected.step_s : 0;
      QVERIFY2(std::abs(shown - want) <= 1e-12, qPrintable(QStringLiteral("%1 %2: share %3, core %4")
                                                                .arg(what, QString::fromStdString(std::string(axis_name(a))))
                                                                .arg(shown)
                                                                .arg(want)));
    }
  }
}

}  // namespace

class RunFitViewTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  int db_count_ = 0;

  QString fresh_db() {
    const QString db = dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_count_));
    qputenv("MESHWORK_DB", db.toLocal8Bit());
    return db;
  }

  const std::vector<MeshShape> history_ = {shape(1, 2, 1, 1), shape(2, 1, 1, 1), shape(1, 1, 1, 2)};

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("HOME", dir_.path().toLocal8Bit());
  }

  void memoryBarAndPlannerUseTheFitOfThisMachinesRuns() {
    const QString db = fresh_db();
    {
      auto s = open_store(db);
      // Each shape twice, the second 4 % slower (runs differ by that much): more runs than the
      // fit has unknowns, so each can be left out and predicted by the fit of the others.
      for (const MeshShape& m : history_) {
        store_run(*s, m, hostname());
        store_run(*s, m, hostname(), 1.04);
      }
    }
    const std::shared_ptr<const RunFit> fit = core_fit(db, std::nullopt, 6);
    QCOMPARE(fit->runs, 6);
    QVERIFY(fit->out_of_sample);
    QVERIFY2(fit->unknowns < 6, qPrintable(QString::number(fit->unknowns)));
    QVERIFY(fit->median_residual > 0);  // judged on runs it did not learn from
    QCOMPARE(QString::fromStdString(fit->base), QStringLiteral("defaults"));

    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, kRanks);
    const RunConfig config = tiny_config(w.plan()->config(), shape(1, 2, 1, 1));
    w.plan()->set_config(config);
    w.set_mode(Mode::plan);
    RunFitModel* fits = w.cluster_panel()->calibrations()->run_fits();
    MemoryPanel* panel = w.plan_page()->memory();
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("fitted to 6 runs"), 20000);
    QCOMPARE(fits->node_set_id(), QString::fromStdString(local_node_set()));
    QVERIFY2(fits->error().isEmpty(), qPrintable(fits->error()));
    QVERIFY(fits->fit());
    QCOMPARE(QString::fromStdString(to_json(*fits->fit()).dump()), QString::fromStdString(to_json(*fit).dump()));

    // The bar's step time is core's estimate with core's fit of the same store.
    TimeQuery q = query_of(w.plan()->config());
    const double unfitted = estimate_time(q).step_s;
    q.fit = fit;
    const TimeEstimate expected = estimate_time(q);
    QVERIFY(expected.compute_fitted);
    QVERIFY(expected.comm_fitted[Axis::dp_shard]);
    const ui::MemoryEstimate& m = *w.plan()->memory();
    QCOMPARE(m.time.step_s, expected.step_s);
    QCOMPARE(m.time.tokens_per_s, expected.tokens_per_s);
    QVERIFY(std::abs(m.time.step_s - unfitted) > 0.1 * unfitted);  // compute measured 1.5x the formula
    QCOMPARE(m.fit_runs, 6);
    QVERIFY(m.time.compute_fitted);
    QVERIFY(m.calibration_id.empty());
    const QString detail = panel->time_basis_detail();
    QVERIFY2(detail.contains(QStringLiteral("no stored calibration")), qPrintable(detail));
    QVERIFY2(detail.contains(QStringLiteral("Fitted to the 6 runs of these nodes")), qPrintable(detail));
    QVERIFY2(detail.contains(QStringLiteral("corrected compute and dp_shard communication")), qPrintable(detail));

    // The planner's rows: core's estimate with the fit, shape by shape, and they say so.
    PlannerModel* planner = w.plan_page()->planner()->model();
    QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3 && planner->row_at(0).fit_runs == 6, 20000);
    check_planner(planner, config, fit, std::nullopt, QStringLiteral("fitted to 6 runs"));
    QCOMPARE(planner->headerData(PlannerModel::Basis, Qt::Horizontal, Qt::DisplayRole).toString(), QStringLiteral("Basis"));

    // A calibration of these nodes: the fit is made again on its base.
    const Calibration cal = local_calibration();
    {
      auto s = open_store(db);
      auto id = store::save_calibration(*s, cal);
      QVERIFY(id.ok());
    }
    w.store_worker()->notify_runs_changed();
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("calibrated + fitted to 6 runs"), 20000);
    const std::shared_ptr<const RunFit> on_cal = core_fit(db, cal, 6);
    QVERIFY(on_cal->base != "defaults");
    {
      TimeQuery qc = query_of(w.plan()->config());
      qc.calibration = cal;
      qc.fit = on_cal;
      const TimeEstimate e = estimate_time(qc);
      QVERIFY(e.compute_calibrated && e.compute_fitted);
      QCOMPARE(w.plan()->memory()->time.step_s, e.step_s);
      QCOMPARE(QString::fromStdString(w.plan()->memory()->calibration_id), QString::fromStdString(cal.fingerprint.id()));
      QVERIFY(panel->time_basis_detail().contains(QString::fromStdString(cal.fingerprint.id()).left(8)));
      QVERIFY(panel->time_basis_detail().contains(QStringLiteral("Fitted to the 6 runs")));
      // The calibration's drift (7 %) or the fit's median residual, whichever is larger.
      QVERIFY(e.step_band >= 0.07);
      QCOMPARE(w.plan()->memory()->time.step_band, e.step_band);
      const QString band = QStringLiteral("No prediction is closer than ± %1 %").arg(static_cast<int>(100 * e.step_band + 0.5));
      QVERIFY2(panel->time_basis_detail().contains(band), qPrintable(panel->time_basis_detail()));
    }
    QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3 && planner->row_at(0).entry.time.compute_calibrated &&
                                 planner->row_at(0).fit_runs == 6, 20000);
    check_planner(planner, config, on_cal, cal, QStringLiteral("calibrated + fitted to 6 runs"));
    QVERIFY(planner->row_at(0).entry.time.step_band >= 0.07);

    // Another finished run of these nodes is learnt once the store says its runs changed.
    {
      auto s = open_store(db);
      store_run(*s, shape(1, 2, 1, 1), hostname());
    }
    w.store_worker()->notify_runs_changed();
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("calibrated + fitted to 7 runs"), 20000);
    const std::shared_ptr<const RunFit> four = core_fit(db, cal, 7);
    {
      TimeQuery qc = query_of(w.plan()->config());
      qc.calibration = cal;
      qc.fit = four;
      QCOMPARE(w.plan()->memory()->time.step_s, estimate_time(qc).step_s);
    }
    QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3 && planner->row_at(0).fit_runs == 7, 20000);
    check_planner(planner, config, four, cal, QStringLiteral("calibrated + fitted to 7 runs"));

    // Other nodes (two GPU boxes): none of these runs are theirs, so no fit.
    test::set_gpu_cluster(w, 2, 8);
    RunConfig gpu = config;
    gpu.mesh = MeshShape{1, -1, 1, 1};
    gpu.training.device = DeviceKind::cuda;
    gpu.training.global_batch = 16;
    w.plan()->set_config(gpu);
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("uncalibrated estimate"), 20000);
    QCOMPARE(w.plan()->memory()->fit_runs, 0);
    QVERIFY(!w.plan()->memory()->time.compute_fitted);
  }

  void runsOfAnotherHostAreNotUsed() {
    const QString db = fresh_db();
    const std::string other = hostname() + "-elsewhere";
    {
      auto s = open_store(db);
      for (const MeshShape& m : history_) store_run(*s, m, other);
      // They are good runs, of another node set: core would fit them there, not here.
      ClusterFingerprint f;
      f.device = DeviceKind::cpu;
      f.nodes = {{other, kRanks, "cpu", 0}};
      auto theirs = store::load_observations(s.get(), f.node_set_id());
      QVERIFY(theirs.ok());
      QCOMPARE(theirs->runs.size(), history_.size());
      auto ours = store::load_observations(s.get(), local_node_set());
      QVERIFY(ours.ok());
      QVERIFY(ours->runs.empty());
    }
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, kRanks);
    const RunConfig config = tiny_config(w.plan()->config(), shape(1, 2, 1, 1));
    w.plan()->set_config(config);
    w.set_mode(Mode::plan);
    RunFitModel* fits = w.cluster_panel()->calibrations()->run_fits();
    // The fit of this machine's node set was made (and found no runs of it).
    QTRY_VERIFY_WITH_TIMEOUT(fits->loads() >= 1 && fits->node_set_id() == QString::fromStdString(local_node_set()), 20000);
    w.store_worker()->drain();
    QTest::qWait(50);
    QVERIFY(!fits->fit());
    QVERIFY2(fits->error().isEmpty(), qPrintable(fits->error()));
    MemoryPanel* panel = w.plan_page()->memory();
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("uncalibrated estimate"), 20000);
    const ui::MemoryEstimate& m = *w.plan()->memory();
    QCOMPARE(m.fit_runs, 0);
    QVERIFY(!m.time.compute_fitted);
    QCOMPARE(m.time.step_s, estimate_time(query_of(w.plan()->config())).step_s);
    QVERIFY(!panel->time_basis_detail().contains(QStringLiteral("Fitted")));
    PlannerModel* planner = w.plan_page()->planner()->model();
    QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3, 20000);
    check_planner(planner, config, nullptr, std::nullopt, QStringLiteral("uncalibrated estimate"));
  }

  // 1, 2 and 5 stored runs of one shape (the fit of that shape has 2 unknowns: compute and FSDP).
  void fewRunsAreNotFittedAndSayWhy() {
    for (int runs : {1, 2, 5}) {
      const QString db = fresh_db();
      {
        auto s = open_store(db);
        for (int i = 0; i < runs; ++i) store_run(*s, shape(1, 2, 1, 1), hostname(), 1.0 + 0.05 * i);
      }
      MainWindow w(false);
      w.resize(1400, 900);
      w.show();
      test::set_local_cluster(w, kRanks);
      const RunConfig config = tiny_config(w.plan()->config(), shape(1, 2, 1, 1));
      w.plan()->set_config(config);
      w.set_mode(Mode::plan);
      RunFitModel* fits = w.cluster_panel()->calibrations()->run_fits();
      QTRY_VERIFY_WITH_TIMEOUT(fits->loads() >= 1 && fits->node_set_id() == QString::fromStdString(local_node_set()), 20000);
      w.store_worker()->drain();
      PlannerModel* planner = w.plan_page()->planner()->model();
      MemoryPanel* panel = w.plan_page()->memory();
      const QString what = QStringLiteral("%1 run(s)").arg(runs);
      if (runs < 5) {
        QTRY_VERIFY_WITH_TIMEOUT(!fits->refusal().isEmpty(), 20000);
        QVERIFY(!fits->fit());
        QVERIFY2(fits->refusal().contains(QStringLiteral("a fit of 2 unknowns needs 3 runs or more")), qPrintable(fits->refusal()));
        QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("uncalibrated estimate"), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3 && !w.plan()->busy(), 20000);
        check_planner(planner, config, nullptr, std::nullopt, QStringLiteral("uncalibrated estimate"));
        for (int row = 0; row < planner->rowCount(); ++row) {
          const QString tip = planner->index(row, PlannerModel::Basis).data(Qt::ToolTipRole).toString();
          QVERIFY2(tip.contains(QStringLiteral("Uncertainty: not measured on this cluster")), qPrintable(what + tip));
          QVERIFY2(tip.contains(QStringLiteral("Cluster › Calibrate measures it")), qPrintable(what + tip));
          QVERIFY2(tip.contains(QStringLiteral("Not fitted to the stored runs of these nodes: %1 run").arg(runs)), qPrintable(what + tip));
          QVERIFY2(!tip.contains(QStringLiteral("0 %")), qPrintable(what + tip));
        }
        const QString status = w.plan_page()->planner()->status_text();
        QVERIFY2(status.contains(QStringLiteral("Uncalibrated estimates")) && status.contains(QStringLiteral("Cluster › Calibrate")),
                 qPrintable(status));
        QVERIFY2(status.contains(QStringLiteral("Not fitted to the stored runs")), qPrintable(status));
        const QString detail = panel->time_basis_detail();
        QVERIFY2(detail.contains(QStringLiteral("Uncalibrated estimate")) && !detail.contains(QStringLiteral("median error")),
                 qPrintable(detail));
        continue;
      }
      const std::shared_ptr<const RunFit> fit = core_fit(db, std::nullopt, 5);
      QCOMPARE(fit->unknowns, 2);
      QCOMPARE(fit->judged_runs, 5);
      QVERIFY(fit->median_residual > 0.01);  // the runs differ by 5 % steps: no run predicts itself
      QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("fitted to 5 runs"), 20000);
      QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3 && planner->row_at(0).fit_runs == 5, 20000);
      check_planner(planner, config, fit, std::nullopt, QStringLiteral("fitted to 5 runs"));
      const QString detail = panel->time_basis_detail();
      QVERIFY2(detail.contains(QStringLiteral("judged on runs it did not learn from")), qPrintable(detail));
      const QString median = QStringLiteral("median error %1 %").arg(static_cast<int>(fit->median_residual * 100 + 0.5));
      QVERIFY2(detail.contains(median), qPrintable(detail + " / " + median));
      QCOMPARE(w.plan()->memory()->time.step_band, fit->median_residual);
    }
  }

  // 4 CPU ranks on a node of 2 cores.
  void oversubscribedNodeIsNamedInThePlannerAndTheEditor() {
    fresh_db();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 4);
    w.plan()->set_config(tiny_config(w.plan()->config(), shape(1, 4, 1, 1)));
    w.set_mode(Mode::plan);
    PlannerModel* planner = w.plan_page()->planner()->model();
    QTRY_VERIFY_WITH_TIMEOUT(planner->rowCount() >= 3 && !w.plan()->busy(), 20000);
    const QString status = w.plan_page()->planner()->status_text();
    QVERIFY2(status.contains(QStringLiteral("4 ranks on 2 cores of this machine: oversubscribed")), qPrintable(status));
    QVERIFY(planner->index(0, PlannerModel::Shape).data(Qt::ToolTipRole).toString().contains(QStringLiteral("oversubscribed")));
    bool named = false;
    for (const Diagnostic& d : w.plan()->diagnostics())
      named = named || (d.field == "cluster" && d.level == Severity::warning && d.message.find("oversubscribed") != std::string::npos);
    QVERIFY(named);
    QVERIFY(w.cluster_panel()->summary_text().contains(QStringLiteral("oversubscribed")));
    // Within its cores: nothing said.
    test::set_local_cluster(w, 2);
    QTRY_VERIFY_WITH_TIMEOUT(!w.plan_page()->planner()->status_text().contains(QStringLiteral("oversubscribed")), 20000);
    for (const Diagnostic& d : w.plan()->diagnostics()) QVERIFY(d.field != "cluster");
  }
};

QTEST_MAIN(RunFitViewTest)
#include "run_fit_view_test.moc"
