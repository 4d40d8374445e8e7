// Planning for a cluster one does not have open, with real widgets on the offscreen platform:
//   - a cluster described by hardware (64 nodes x 8 H100 80 GB) in the Cluster mode plans the
//     same ranked shapes with the same numbers as the real `meshwork plan` binary with the same
//     flags (--gpu-memory 80GiB, and --gpu h100-80gb), its comm columns add up to the CLI's comm
//     share of each shape, it is kept in the saved list (a new window lists it and plans on it
//     again), Launch waits for real nodes, and File > Export writes its configs with no node
//     reachable;
//   - nodes that do not answer (real probes of closed ports) are never counted: the plan stays on
//     the nodes that answered, and the unreachable ones are named as such.
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "core/gpu_kinds.h"
#include "core/interop/ecosystem_config.h"
#include "core/planner.h"
#include "test_support.h"
#include "ui/cluster_panel.h"
#include "ui/described_cluster_panel.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_model.h"
#include "ui/planner_panel.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

const char* const kModel = "llama-3.1-70b";

// The flags the plan is made with, in the CLI's words.
QStringList plan_flags() {
  return {"plan", "--model", kModel, "--nodes", "64", "--gpus-per-node", "8", "--seq-len", "4096",
          "--micro-batch", "1", "--global-batch", "512"};
}

struct Cli {
  int rc = -1;
  QString out, err;
};

Cli run_cli(const QStringList& args) {
  QProcess p;
  p.start(QStringLiteral(MESHWORK_BIN), args);
  Cli r;
  if (!p.waitForFinished(120000)) return r;
  r.rc = p.exitCode();
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

// The same training settings as the CLI's flags, on the workbench's editor.
RunConfig cli_training(RunConfig c) {
  c.model = kModel;
  c.training = PlanQuery{}.training;
  c.training.seq_len = 4096;
  c.training.micro_batch = 1;
  c.training.global_batch = 512;
  c.mesh = MeshShape{1, -1, 1, 1};
  return c;
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

// The planner's rows against the CLI's JSON, rank by rank.
void compare_rows(PlannerModel* planner, const nlohmann::json& cli) {
  const nlohmann::json& shapes = cli["shapes"];
  QCOMPARE(planner->rowCount(), static_cast<int>(shapes.size()));
  for (int i = 0; i < planner->rowCount(); ++i) {
    const PlanEntry& e = planner->row_at(i).entry;
    const nlohmann::json& s = shapes[static_cast<size_t>(i)];
    const QString what = QStringLiteral("#%1 %2").arg(i + 1).arg(QString::fromStdString(e.shape.compact()));
    QVERIFY2(e.shape[Axis::dp_replicate] == s["dp_replicate"].get<int>() && e.shape[Axis::dp_shard] == s["dp_shard"].get<int>() &&
                 e.shape[Axis::cp] == s["cp"].get<int>() && e.shape[Axis::tp] == s["tp"].get<int>(),
             qPrintable(what + QString::fromStdString(" vs " + s.dump())));
    QCOMPARE(e.fits, s["fits"].get<bool>());
    QCOMPARE(e.memory.at_peak().total, s["memory_bytes"]["total"].get<int64_t>());
    QVERIFY2(close(e.time.step_s, s["step_time_s"].get<double>()), qPrintable(what));
    QVERIFY2(close(e.time.tokens_per_s, s["tokens_per_s"].get<double>()), qPrintable(what));
    QVERIFY2(close(e.time.mfu, s["mfu"].get<double>()), qPrintable(what));
  }
}

}  // namespace

class HypotheticalClusterTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir home_;

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("HOME", home_.path().toLocal8Bit());
    qputenv("MESHWORK_DB", home_.filePath(QStringLiteral("runs.db")).toLocal8Bit());
  }

  void describedClusterPlansLikeTheCliAndIsSavedAndExported() {
    const QString label = QStringLiteral("pod (64 × 8 NVIDIA H100 80 GB (SXM))");
    {
      MainWindow w(false);
      w.resize(1400, 900);
      w.show();
      test::set_local_cluster(w, 2);
      auto* panel = w.findChild<DescribedClusterPanel*>();
      QVERIFY(panel);
      panel->set_name(QStringLiteral("pod"));
      panel->set_nodes(64);
      panel->set_gpus_per_node(8);
      QVERIFY(panel->set_kind(QStringLiteral("h100-80gb")));
      QVERIFY(!panel->set_kind(QStringLiteral("h100-pcie-toaster")));
      panel->plan_for_it();
      QVERIFY(w.cluster()->is_described());
      QCOMPARE(w.cluster()->rowCount(), 64);
      QVERIFY2(w.cluster_panel()->summary_text().contains(QStringLiteral("Described cluster")), qPrintable(w.cluster_panel()->summary_text()));
      QCOMPARE(w.plan()->cluster().world_size, 512);
      QCOMPARE(w.plan()->cluster().ranks_per_node, 8);
      QCOMPARE(w.plan()->cluster().device, DeviceKind::cuda);
      QCOMPARE(w.plan()->cluster().device_memory_bytes, 80.0 * (int64_t{1} << 30));
      QCOMPARE(panel->saved(), QStringList{label});

      w.plan()->set_config(cli_training(w.plan()->config()));
      w.set_mode(Mode::plan);
      PlannerModel* planner = w.plan_page()->planner()->model();
      QTRY_VERIFY_WITH_TIMEOUT(!w.plan()->busy() && planner->rowCount() > 100, 60000);

      // The CLI with the same flags: by memory size, and by the GPU kind.
      for (const QStringList& gpu : {QStringList{"--gpu-memory", "80GiB"}, QStringList{"--gpu", "h100-80gb"}}) {
        const Cli cli = run_cli(plan_flags() + gpu + QStringList{"--json"});
        QVERIFY2(cli.rc == 0, qPrintable(cli.err));
        compare_rows(planner, nlohmann::json::parse(cli.out.toStdString()));
      }
      // The comm columns add up to the CLI table's comm share of the same shape (what overlaps
      // compute is not counted by either).
      const Cli table = run_cli(plan_flags() + QStringList{"--gpu-memory", "80GiB"});
      QVERIFY2(table.rc == 0, qPrintable(table.err));
      int checked = 0;
      const QRegularExpression row(QStringLiteral("^\\s*(\\d+)\\s+\\d+\\s+\\d+\\s+\\d+\\s+\\d+\\s+(yes|no)\\s.*\\s([0-9.]+)%\\s*!?\\s*$"));
      for (const QString& line : table.out.split('\n')) {
        const auto m = row.match(line);
        if (!m.hasMatch()) continue;
        const int r = m.captured(1).toInt() - 1;
        QVERIFY(r < planner->rowCount());
        double sum = 0;
        for (int c = PlannerModel::CommFirst; c < PlannerModel::Basis; ++c)
          sum += planner->index(r, c).data(PlannerModel::ShareRole).toDouble();
        QVERIFY2(std::abs(100 * sum - m.captured(3).toDouble()) <= 0.051,
                 qPrintable(QStringLiteral("%1: planner %2 %, CLI %3").arg(line).arg(100 * sum).arg(m.captured(3))));
        ++checked;
      }
      QCOMPARE(checked, planner->rowCount());
      // Nothing to launch on, and no calibration of it: the planner says uncalibrated.
      QVERIFY(!w.launch_action()->isEnabled());
      QVERIFY(w.launch_action()->toolTip().contains(QStringLiteral("described cluster")));
      QCOMPARE(planner->index(0, PlannerModel::Basis).data().toString(), QStringLiteral("uncalibrated estimate"));

      // File > Export with no node reachable: the best fitting shape as Accelerate's config.
      w.plan_page()->planner()->apply_row(0);
      QTRY_VERIFY(w.plan()->mesh().has_value());
      auto request = w.ecosystem_export_request();
      QVERIFY2(request.ok(), request.ok() ? "" : request.error().message().c_str());
      QCOMPARE(request->num_machines, 64);
      QCOMPARE(request->processes_per_machine, 8);
      QCOMPARE(request->main_address, std::string("NODE0_ADDRESS"));
      auto exported = interop::export_config(*request, interop::ConfigFormat::torchtitan);
      QVERIFY2(exported.ok(), exported.ok() ? "" : exported.error().message().c_str());
      QCOMPARE(exported->launch_commands.size(), size_t{64});
    }
    // A new window: the cluster is in the saved list, and plans again when chosen.
    MainWindow again(false);
    again.show();
    auto* panel = again.findChild<DescribedClusterPanel*>();
    QVERIFY(panel);
    QCOMPARE(panel->saved(), QStringList{label});
    test::set_local_cluster(again, 2);
    QVERIFY(panel->use_saved(label));
    QVERIFY(again.cluster()->is_described());
    QCOMPARE(again.plan()->cluster().world_size, 512);
    QCOMPARE(QString::fromStdString(panel->source().name), QStringLiteral("pod"));
    // Back to the SSH nodes: this machine again.
    panel->back_to_nodes();
    QVERIFY(!again.cluster()->is_described());
    QCOMPARE(again.plan()->cluster().world_size, 2);

    // A custom GPU: its own memory and peak.
    panel->set_custom(96, 500, 250, 200, 25);
    panel->set_nodes(2);
    panel->set_gpus_per_node(4);
    panel->plan_for_it();
    QCOMPARE(again.plan()->cluster().world_size, 8);
    QCOMPARE(again.plan()->cluster().device_memory_bytes, 96.0 * (int64_t{1} << 30));
    QVERIFY(again.plan()->cluster().hardware.has_value());
    QCOMPARE(again.plan()->cluster().hardware->peak_flops_bf16, 500e12);
    QCOMPARE(again.plan()->cluster().hardware->intra_node_bytes_per_s, 200e9);
    QCOMPARE(panel->saved().size(), 2);
  }

  void unreachableNodesAreNotCounted() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.cluster_panel()->set_ask_host_keys(false);
    test::set_local_cluster(w, 6);
    QCOMPARE(w.plan()->cluster().world_size, 6);
    // Two hosts whose SSH port is closed: their probes fail for real.
    w.cluster_panel()->add_hosts(QStringLiteral("127.0.0.1:1, 127.0.0.2:1"));
    QCOMPARE(w.cluster()->rowCount(), 3);
    QTRY_VERIFY_WITH_TIMEOUT(w.cluster()->node(1).state == NodeInfo::State::failed &&
                                 w.cluster()->node(2).state == NodeInfo::State::failed, 60000);
    QTRY_VERIFY(!w.plan()->busy());
    // The plan stays on the node that answered: 1 node x 6 ranks, not "3 nodes x 6".
    QCOMPARE(w.plan()->cluster().num_nodes, 1);
    QCOMPARE(w.plan()->cluster().world_size, 6);
    QCOMPARE(w.plan()->cluster().ranks_per_node, 6);
    QCOMPARE(w.plan()->config().nodes.size(), size_t{1});
    QCOMPARE(w.plan()->config().nodes.front().host, std::string("local"));
    if (w.plan()->mesh()) {
      QCOMPARE(w.plan()->mesh()->world_size(), 6);
      QCOMPARE(w.plan()->mesh()->num_nodes(), 1);
    }
    // ... and the unreachable nodes are shown as such.
    const QString summary = w.cluster_panel()->summary_text();
    QVERIFY2(summary.contains(QStringLiteral("1 node(s) · 6 ranks")), qPrintable(summary));
    QVERIFY2(summary.contains(QStringLiteral("2 unreachable node(s) not counted: 127.0.0.1:1, 127.0.0.2:1")), qPrintable(summary));
    QVERIFY(!w.cluster()->node(1).error.isEmpty());
  }
};

QTEST_MAIN(HypotheticalClusterTest)
#include "hypothetical_cluster_test.moc"
