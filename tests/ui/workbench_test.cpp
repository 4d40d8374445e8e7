// The workbench with real widgets on the offscreen platform: editing the mesh re-validates through
// core at once, the view and the memory bar follow, the planner applies shapes, and the
// configuration round-trips through the run config JSON.
#include <algorithm>

#include <QAction>
#include <QComboBox>
#include <QSignalSpy>
#include <QTableView>
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QMessageBox>
#include <QSortFilterProxyModel>
#include <QTest>
#include <QTimer>

#include "core/validation.h"
#include "test_support.h"
#include "ui/cluster_panel.h"
#include "ui/axis_colors.h"
#include "ui/inspector.h"
#include "ui/theme.h"
#include "ui/memory_panel.h"
#include "ui/mesh_editor.h"
#include "ui/mesh_view.h"
#include "ui/node_card.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/slurm_panel.h"
#include "ui/planner_model.h"
#include "ui/planner_panel.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
// Picks `size` in the axis combo as a user would (the combo's activated signal).
void choose_axis(MeshEditor* editor, Axis axis, int size) {
  QComboBox* box = editor->axis_combo(axis);
  const int i = box->findData(size);
  QVERIFY2(i >= 0, qPrintable(QStringLiteral("size %1 not offered").arg(size)));
  box->setCurrentIndex(i);
  Q_EMIT box->activated(i);
}

// The bytes of one term ("params", "optimizer", ...) of the estimate the memory panel shows; -1
// when the panel shows none.
double panel_term(const MemoryPanel* panel, const std::string& name) {
  if (!panel->breakdown()) return -1;
  for (const MemoryTerm& t : panel->breakdown()->memory.peak_terms())
    if (t.name == name) return double(t.bytes);
  return -1;
}

// Answers the next modal file dialog as a user would: goes to `dir` and presses Choose. It polls,
// because the dialog opens inside the slot (QFileDialog's own exec()), after this returns. The
// dialog's title is recorded so the test knows the dialog was really asked.
void choose_directory_in_next_dialog(const QString& dir, QString* title) {
  auto* timer = new QTimer;
  timer->setInterval(10);
  QObject::connect(timer, &QTimer::timeout, [timer, dir, title] {
    auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
    if (!dialog) return;
    timer->stop();
    timer->deleteLater();
    *title = dialog->windowTitle();
    QCOMPARE(dialog->fileMode(), QFileDialog::Directory);
    dialog->setDirectory(dir);
    QMetaObject::invokeMethod(dialog, "accept");  // what its Choose button does (a protected slot)
  });
  timer->start();
}

RunConfig base_config(const MainWindow& w, const char* model) {
  RunConfig c = w.plan()->config();
  c.model = model;
  c.mesh = MeshShape{1, -1, 1, 1};
  c.training.seq_len = 2048;
  c.training.micro_batch = 1;
  c.training.global_batch = 64;
  c.training.precision = Precision::bf16;
  c.training.device = DeviceKind::cuda;
  return c;
}
}  // namespace

class WorkbenchTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void axisChangeUpdatesViewAndMemory() {
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    w.plan()->set_config(base_config(w, "llama-3.1-8b"));
    QTRY_VERIFY(w.plan()->memory().has_value());
    const double before = double(w.plan()->memory()->memory.total());
    MeshView* view = w.plan_page()->view();
    view->set_group_kind(GroupKind::tp);
    QCOMPARE(view->mesh()->shape()[Axis::tp], 1);
    QCOMPARE(view->mesh()->shape()[Axis::dp_shard], 16);

    QSignalSpy memory_spy(w.plan(), &PlanState::memory_changed);
    choose_axis(w.plan_page()->editor(), Axis::tp, 4);
    // The view follows at once: tp = 4, dp_shard (auto) = 4, ranks 0-3 share a tp group.
    QCOMPARE(view->mesh()->shape()[Axis::tp], 4);
    QCOMPARE(view->mesh()->shape()[Axis::dp_shard], 4);
    QCOMPARE(view->cell_fill(0), view->cell_fill(3));
    QVERIFY(view->cell_fill(3) != view->cell_fill(4));
    QVERIFY(w.plan_page()->editor()->axis_combo(Axis::dp_shard)->currentText().contains("auto (4)"));
    // The memory estimate follows off the GUI thread: tp = 4 splits the parameters 4 more ways.
    QTRY_VERIFY(memory_spy.count() >= 1);
    QTRY_VERIFY(w.plan()->memory() && double(w.plan()->memory()->memory.total()) != before);
    QCOMPARE(w.plan_page()->memory()->breakdown()->memory.total(), w.plan()->memory()->memory.total());
    QVERIFY(w.plan_page()->memory()->headline().contains("GiB"));
    QVERIFY(w.launch_action()->isEnabled());
  }

  void axisOffersOnlyDivisors() {
    MainWindow w(false);
    test::set_gpu_cluster(w, 3, 4);  // 12 ranks
    QComboBox* tp = w.plan_page()->editor()->axis_combo(Axis::tp);
    QList<int> offered;
    for (int i = 0; i < tp->count(); ++i) offered << tp->itemData(i).toInt();
    QCOMPARE(offered, (QList<int>{-1, 1, 2, 3, 4, 6, 12}));
  }

  void invalidShapeShowsCoreMessageAndDisablesLaunch() {
    MainWindow w(false);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    w.plan()->set_config(base_config(w, "tiny"));  // tiny has 8 attention heads
    QTRY_VERIFY(w.launch_action()->isEnabled());
    choose_axis(w.plan_page()->editor(), Axis::tp, 16);
    // core's own words, next to the tp control.
    ModelSpec tiny = *load_model_spec("tiny");
    ShapeQuery q;
    q.shape = MeshShape{1, -1, 1, 16};
    q.placement.world_size = 16;
    q.placement.ranks_per_node = 8;
    q.model = tiny;
    const ShapeReport report = validate_shape(q);
    QVERIFY(!report.ok());
    QString expected;
    for (const Diagnostic& d : report.errors())
      if (d.field == "tp") expected = QString::fromStdString(d.message);
    QVERIFY(!expected.isEmpty());
    const QString shown = w.plan_page()->editor()->message_for("tp");
    QVERIFY2(shown.contains(expected), qPrintable(shown + " vs " + expected));
    QVERIFY(w.plan()->has_errors());
    QVERIFY(!w.launch_action()->isEnabled());
    // Back to a valid shape: the message goes, launching comes back.
    choose_axis(w.plan_page()->editor(), Axis::tp, 2);
    QVERIFY(w.plan_page()->editor()->message_for("tp").isEmpty());
    QTRY_VERIFY(w.launch_action()->isEnabled());
  }

  void accelerateRefusedShapeIsMarkedNotHidden() {
    MainWindow w(false);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    RunConfig c = base_config(w, "llama-3.1-8b");
    c.mesh = MeshShape{2, 1, 1, 8};  // tp inside each node, pure replication across them
    w.plan()->set_config(c);
    // meshtrain runs it: no error, launching stays possible, and the editor says what Accelerate
    // would do, in core's words, under the mesh.
    ShapeQuery q;
    q.shape = c.mesh;
    q.placement.world_size = 16;
    q.placement.ranks_per_node = 8;
    const ShapeReport report = validate_shape(q);
    QVERIFY(report.ok());
    QVERIFY(!report.accelerate_refusal.empty());
    QVERIFY(!w.plan()->has_errors());
    const QString note = w.plan_page()->editor()->message_for("mesh");
    QVERIFY2(note.contains(QString::fromStdString(report.accelerate_refusal)), qPrintable(note));
    QTRY_VERIFY(w.launch_action()->isEnabled());
    // The planner lists such shapes, each marked with the reason in its tooltip; others are not.
    PlannerModel* planner = w.plan_page()->planner()->model();
    QTRY_VERIFY(planner->rowCount() > 3);
    int marked = 0, plain = 0;
    for (int r = 0; r < planner->rowCount(); ++r) {
      const PlanEntry& row = planner->row_at(r).entry;
      const bool refused = row.shape[Axis::dp_replicate] > 1 && row.shape[Axis::dp_shard] == 1 &&
                           (row.shape[Axis::tp] > 1 || row.shape[Axis::cp] > 1);
      QCOMPARE(!row.accelerate_refusal.empty(), refused);
      const QString shape = planner->data(planner->index(r, PlannerModel::Shape), Qt::DisplayRole).toString();
      QCOMPARE(shape.contains(QStringLiteral("not Accelerate")), refused);
      if (refused) {
        ++marked;
        QVERIFY(planner->data(planner->index(r, PlannerModel::Shape), Qt::ToolTipRole).toString().contains(
            QString::fromStdString(row.accelerate_refusal)));
      } else {
        ++plain;
      }
    }
    QVERIFY(marked > 0);
    QVERIFY(plain > 0);
    // A shape Accelerate accepts carries no such note.
    choose_axis(w.plan_page()->editor(), Axis::dp_shard, 2);
    choose_axis(w.plan_page()->editor(), Axis::dp_replicate, 1);
    QVERIFY(!w.plan()->has_errors());
    QVERIFY(w.plan_page()->editor()->message_for("mesh").isEmpty());
  }

  void applyingPlannerRowSetsEditor() {
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    w.plan()->set_config(base_config(w, "llama-3.1-8b"));
    PlannerPanel* planner = w.plan_page()->planner();
    QTRY_VERIFY(planner->model()->rowCount() > 3);
    // A row whose shape differs from the current one.
    QTableView* table = planner->table();
    int row = -1;
    MeshShape target;
    for (int r = 0; r < table->model()->rowCount(); ++r) {
      const int src = qobject_cast<QSortFilterProxyModel*>(table->model())->mapToSource(table->model()->index(r, 0)).row();
      target = planner->model()->row_at(src).entry.shape;
      if (!(target == w.plan()->mesh()->shape()) && target[Axis::tp] > 1) {
        row = r;
        break;
      }
    }
    QVERIFY(row >= 0);
    const QRect cell = table->visualRect(table->model()->index(row, 1));
    table->scrollTo(table->model()->index(row, 1));
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(table->model()->index(row, 1)).center());
    Q_UNUSED(cell);
    QCOMPARE(w.plan()->config().mesh, target);
    QCOMPARE(w.plan_page()->view()->mesh()->shape(), target);
    MeshEditor* ed = w.plan_page()->editor();
    for (Axis a : kAxes) QCOMPARE(ed->axis_combo(a)->currentData().toInt(), target.size(a));
  }

  void hoverOutlinesGroupsAndClickSelectsRank() {
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    RunConfig c = base_config(w, "llama-3.1-8b");
    c.mesh = MeshShape{1, -1, 1, 4};
    w.plan()->set_config(c);
    MeshView* view = w.plan_page()->view();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QPoint p = view->cell_rect(5).center().toPoint();
    QCOMPARE(view->rank_at(p), 5);
    QTest::mouseMove(view, p);
    QTRY_COMPARE(view->hovered_rank(), 5);
    QTest::mouseClick(view, Qt::LeftButton, {}, p);
    QCOMPARE(view->selected_rank(), 5);
    // The inspector names the rank, its coordinates and its tp group (ranks 4-7).
    const QString text = w.inspector()->text();
    QVERIFY2(text.contains("Rank 5") && text.contains("4, <b>5</b>, 6, 7"), qPrintable(text));
    // Keyboard: Right moves to rank 6, PageDown to the same GPU on the next node, Esc clears.
    view->setFocus();
    QTest::keyClick(view, Qt::Key_Right);
    QCOMPARE(view->selected_rank(), 6);
    QTest::keyClick(view, Qt::Key_PageDown);
    QCOMPARE(view->selected_rank(), 14);
    QVERIFY(w.inspector()->text().contains("Rank 14"));
    QTest::keyClick(view, Qt::Key_Escape);
    QCOMPARE(view->selected_rank(), -1);
    QVERIFY(w.inspector()->text().contains("Nothing selected"));
  }

  // pp = 2 over 2 nodes x 8: stage 0 on node 0, stage 1 on node 1. Every rank carries its
  // stage's bar (drawn: the pixels under the cell are the stage's colour), the node headers and
  // the tooltip name the stage, and the memory panel shows the worst stage.
  void pipelineStagesAreDrawnOverTheNodes() {
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    RunConfig c = base_config(w, "llama-3.1-8b");
    c.mesh = MeshShape{1, -1, 1, 1, 2};
    w.plan()->set_config(c);
    MeshView* view = w.plan_page()->view();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY(view->mesh().has_value());
    QCOMPARE(view->stages(), 2);
    QCOMPARE(view->stage_of(7), 0);
    QCOMPARE(view->stage_of(8), 1);
    QVERIFY(view->stage_color(0) != view->stage_color(1));
    const QImage shot = view->grab().toImage();
    const qreal dpr = shot.devicePixelRatio();
    for (int rank : {3, 12}) {
      const QRectF cell = view->cell_rect(rank);
      const QPoint bar((cell.center().x()) * dpr, (cell.bottom() - 1.5) * dpr);
      QCOMPARE(shot.pixelColor(bar).rgb(), view->stage_color(view->stage_of(rank)).rgb());
    }
    const QString tip = view->tooltip_at(view->cell_rect(9).center());
    QVERIFY2(tip.contains("pipeline stage 1 of 2"), qPrintable(tip));
    // The bar is core's worst stage, which holds part of the 32 layers (the cut gives the stage
    // without the head more of them).
    QTRY_VERIFY(w.plan_page()->memory()->breakdown().has_value());
    const MemoryEstimate& b = *w.plan_page()->memory()->breakdown();
    QCOMPARE(b.stages, 2);
    QVERIFY(b.memory.stage_layers > 0 && b.memory.stage_layers < 32);
    QVERIFY(b.time.pp_bubble_fraction > 0 && b.time.pp_bubble_fraction < 0.5);
    const QString headline = w.plan_page()->memory()->headline();
    QVERIFY2(headline.contains(QString("worst of 2 stages: stage %1, %2 layers").arg(b.memory.pp_stage).arg(qint64(b.memory.stage_layers))),
             qPrintable(headline));
  }

  void hostfileAddsNodesWithSlotsAndShowsProbeErrors() {
    MainWindow w(false);
    QTemporaryDir dir;
    QFile f(dir.filePath("hostfile"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    // Port 1 on loopback: nothing listens, the probe fails at once with a reason.
    f.write("# two nodes\n127.0.0.1:1 slots=4\nuser@127.0.0.2:1 slots=4\n");
    f.close();
    w.cluster_panel()->add_hostfile(f.fileName());
    QCOMPARE(w.cluster()->rowCount(), 3);
    QCOMPARE(w.cluster()->node(1).slots, 4);
    QCOMPARE(w.plan()->cluster().world_size, w.cluster()->node(0).slots + 8);
    for (int row : {1, 2}) {
      QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::failed, 20000);
      QVERIFY(!w.cluster_panel()->card(w.cluster()->node(row).host)->error_text().isEmpty());
    }
    // Nodes that did not answer leave the plan.
    QCOMPARE(w.plan()->cluster().world_size, w.cluster()->node(0).slots);
    // A malformed hostfile is refused with remote's words, naming file and line.
    QFile bad(dir.filePath("bad"));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write("good-host slots=2\nbad host slots=x\n");
    bad.close();
    w.cluster_panel()->add_hostfile(bad.fileName());
    QVERIFY(w.cluster_panel()->add_error().contains(":2"));
    QCOMPARE(w.cluster()->rowCount(), 3);
  }

  void saveAndLoadRoundTrip() {
    QTemporaryDir dir;
    const QString path = dir.filePath("run.json");
    RunConfig saved;
    {
      MainWindow w(false);
      test::set_gpu_cluster(w, 2, 8);
      RunConfig c = base_config(w, "llama-3.2-1b");
      c.mesh = MeshShape{2, 4, 1, 2};
      c.training.activation_checkpointing = ActivationCheckpointing::full;
      w.plan()->set_config(c);
      QVERIFY(w.save_config(path));
      saved = w.plan()->config();
    }
    MainWindow w(false);
    QVERIFY(w.load_config(path));
    QCOMPARE(w.cluster()->rowCount(), 2);
    QCOMPARE(w.cluster()->node(1).gpus.size(), size_t(8));
    QCOMPARE(w.plan()->config().mesh, (MeshShape{2, 4, 1, 2}));
    QCOMPARE(w.plan()->config().training, saved.training);
    QVERIFY(w.plan()->config().model == nlohmann::json("llama-3.2-1b"));
    QCOMPARE(w.plan()->cluster().world_size, 16);
    QCOMPARE(w.plan_page()->editor()->axis_combo(Axis::dp_replicate)->currentData().toInt(), 2);
    // A broken file is refused with core's words, and nothing changes.
    QFile bad(dir.filePath("bad.json"));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write(R"({"v":1,"training":{"seq_len":"long"}})");
    bad.close();
    QTimer::singleShot(0, [] {
      for (QWidget* tl : QApplication::topLevelWidgets())
        if (auto* box = qobject_cast<QMessageBox*>(tl)) box->accept();
    });
    QVERIFY(!w.load_config(bad.fileName()));
    QCOMPARE(w.plan()->config().mesh, (MeshShape{2, 4, 1, 2}));
  }

  // A Slurm partition is the cluster's source, not a host-name prefix: its rows carry the GPU
  // memory declared in the Slurm section, and with none declared the summary says it is not known
  // (sinfo reports counts and types only) instead of assuming one. Saved and loaded with the config.
  void slurmPartitionPlansWithTheDeclaredGpuMemoryNeverAnAssumedOne() {
    QTemporaryDir dir;
    const QString path = dir.filePath("slurm.json");
    {
      MainWindow w(false);
      QVariantMap gpu{{"name", "gpu"}, {"default", true}, {"up", true}, {"nodes", 4}, {"idle", 4},
                      {"gpus_per_node", 8}, {"gpu_type", "h100"}, {"cpus_per_node", 64},
                      {"memory_mb", 512000.0}, {"time_limit", "1:00:00"}};
      w.slurm_panel()->set_login("login1");
      w.slurm_panel()->set_partitions("login1", {gpu});
      w.slurm_panel()->set_nodes(2);
      w.slurm_panel()->set_enabled_for_launch(true);
      QVERIFY(w.cluster()->is_slurm());
      QCOMPARE(w.cluster()->rowCount(), 2);
      QCOMPARE(w.cluster()->node(1).gpus.size(), size_t(8));
      QCOMPARE(w.cluster()->summary().device, DeviceKind::cuda);
      QCOMPARE(w.cluster()->summary().device_memory_bytes, 0.0);
      QTRY_VERIFY2(w.cluster_panel()->summary_text().contains("GPU memory of partition gpu not known"),
                   qPrintable(w.cluster_panel()->summary_text()));
      w.slurm_panel()->set_gpu_memory_gib(80);
      QCOMPARE(w.cluster()->summary().device_memory_bytes, 80.0 * (1ull << 30));
      QTRY_COMPARE(w.plan()->cluster().device_memory_bytes, 80.0 * (1ull << 30));
      QTRY_VERIFY2(!w.cluster_panel()->summary_text().contains("not known"),
                   qPrintable(w.cluster_panel()->summary_text()));
      const SlurmPartitionSource* src = slurm_source(w.cluster()->source());
      QVERIFY(src);
      QCOMPARE(src->login, std::string("login1"));
      QCOMPARE(src->gpu_type, std::string("h100"));
      QVERIFY(w.save_config(path));
      w.slurm_panel()->set_enabled_for_launch(false);
      QVERIFY(!w.cluster()->is_slurm());
    }
    auto saved = load_run_config(path.toStdString());
    QVERIFY(saved.ok());
    QVERIFY(is_slurm(saved->source));
    QCOMPARE(slurm_source(saved->source)->partition, std::string("gpu"));
    MainWindow w(false);
    QVERIFY(w.load_config(path));
    QVERIFY(w.cluster()->is_slurm());
    QCOMPARE(w.cluster()->rowCount(), 2);
    QCOMPARE(w.cluster()->summary().device_memory_bytes, 80.0 * (1ull << 30));
  }

  void modelFromConfigJsonAndItsErrors() {
    MainWindow w(false);
    test::set_gpu_cluster(w, 1, 8);
    QTemporaryDir dir;
    // A Hugging Face config.json (the bundled tiny preset's text) picked as a file.
    const QString good = dir.filePath("config.json");
    QVERIFY(QFile::copy(QStringLiteral(MESHWORK_RESOURCE_DIR "/models/tiny.json"), good));
    w.plan()->set_model(good.toStdString());
    QVERIFY(w.plan_page()->editor()->message_for("model").isEmpty());
    auto* combo = qobject_cast<QComboBox*>(w.plan_page()->editor()->control("model"));
    QCOMPARE(combo->currentData().toString(), good);
    QTRY_VERIFY(w.plan()->memory().has_value());
    // A config.json core cannot use: its message (naming the field) shows under the model picker.
    const QString bad = dir.filePath("broken.json");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"model_type": "llama", "hidden_size": 64})");
    f.close();
    w.plan()->set_model(bad.toStdString());
    auto core = model_spec_from_run_model(bad.toStdString());
    QVERIFY(!core.ok());
    const QString shown = w.plan_page()->editor()->message_for("model");
    QVERIFY2(shown.contains(QString::fromStdString(core.error().allowed)), qPrintable(shown));
    QVERIFY(!w.launch_action()->isEnabled());
  }

  void modelFromHuggingFaceDirectory() {
    MainWindow w(false);
    test::set_gpu_cluster(w, 1, 8);
    MemoryPanel* panel = w.plan_page()->memory();
    PlannerModel* table = w.plan_page()->planner()->model();
    // The default model's estimate and planner table, as shown, before anything is picked.
    QVERIFY(w.plan()->config().model == nlohmann::json("tiny"));
    QTRY_VERIFY(!w.plan()->busy() && panel_term(panel, "params") > 0 && table->rowCount() > 0);
    const double tiny_params = panel_term(panel, "params");
    const int64_t tiny_first_row_memory = table->row_at(0).entry.memory.total();

    // A model directory as save_pretrained leaves it: config.json beside the weights.
    QTemporaryDir dir;
    QVERIFY(QFile::copy(QStringLiteral(MESHWORK_RESOURCE_DIR "/models/small.json"), dir.filePath("config.json")));
    QFile weights(dir.filePath("model.safetensors"));
    QVERIFY(weights.open(QIODevice::WriteOnly));
    weights.close();
    // What core says about that model on this cluster: what the panel and the table must show.
    RunConfig picked = w.plan()->config();
    picked.model = dir.path().toStdString();
    auto want_memory = estimate_memory(picked, w.plan()->cluster());
    auto want_plan = plan_shapes(picked, w.plan()->cluster());
    QVERIFY(want_memory.ok() && want_plan.ok() && !want_plan->empty());
    const std::vector<MemoryTerm> want_terms = want_memory->memory.peak_terms();
    const auto want_params = std::find_if(want_terms.begin(), want_terms.end(),
                                          [](const MemoryTerm& t) { return t.name == "params"; });
    QVERIFY(want_params != want_terms.end());
    QVERIFY(want_params->bytes != tiny_params);  // else the test could not tell a change

    // The model picker's "Open model directory…" entry, chosen as a user would; the directory
    // chooser it opens is answered with the directory.
    auto* combo = qobject_cast<QComboBox*>(w.plan_page()->editor()->control("model"));
    const int entry = combo->findData(QStringLiteral("__open_dir__"));
    QVERIFY(entry >= 0);
    QString dialog_title;
    choose_directory_in_next_dialog(dir.path(), &dialog_title);
    combo->setCurrentIndex(entry);
    Q_EMIT combo->activated(entry);
    QCOMPARE(dialog_title, QStringLiteral("Open a Hugging Face model directory"));
    QVERIFY(w.plan()->config().model == nlohmann::json(dir.path().toStdString()));
    QCOMPARE(combo->currentData().toString(), dir.path());
    QVERIFY(w.plan_page()->editor()->message_for("model").isEmpty());

    // The memory panel now shows the directory's model, not the default's.
    QTRY_COMPARE(panel_term(panel, "params"), double(want_params->bytes));
    QVERIFY(panel_term(panel, "params") != tiny_params);
    QCOMPARE(panel->breakdown()->memory.total(), want_memory->memory.total());
    // The planner's table was recomputed for it: core's rows for the new model, row by row.
    QTRY_VERIFY(!w.plan()->busy() && table->rowCount() == int(want_plan->size()) &&
                table->row_at(0).entry.memory.total() == (*want_plan)[0].entry.memory.total());
    for (int r = 0; r < table->rowCount(); ++r) {
      const PlanEntry& shown = table->row_at(r).entry;
      const PlanEntry& want = (*want_plan)[size_t(r)].entry;
      QCOMPARE(shown.shape, want.shape);
      QCOMPARE(shown.memory.total(), want.memory.total());
      QCOMPARE(shown.time.tokens_per_s, want.time.tokens_per_s);
    }
    QVERIFY(table->row_at(0).entry.memory.total() != tiny_first_row_memory);
  }

  void badHostShowsErrorUnderField() {
    MainWindow w(false);
    w.cluster_panel()->add_hosts("user@@host:99999");
    QVERIFY(!w.cluster_panel()->add_error().isEmpty());
    QCOMPARE(w.cluster()->rowCount(), 1);  // only the local machine
  }

  void layoutAndThemeRememberedAcrossSessions() {
    {
      MainWindow w(false);
      w.resize(1111, 777);
      w.show();
      w.set_mode(Mode::cluster);
      w.set_dark(true);
      test::set_gpu_cluster(w, 2, 4);
      RunConfig c = w.plan()->config();
      c.mesh = MeshShape{2, -1, 1, 2};
      w.plan()->set_config(c);
      QVERIFY(w.close());  // closeEvent saves the settings
    }
    MainWindow w(false);
    QCOMPARE(w.mode(), Mode::cluster);
    QVERIFY(is_dark());
    QCOMPARE(w.size(), QSize(1111, 777));
    QCOMPARE(w.cluster()->rowCount(), 2);
    QCOMPARE(w.plan()->config().mesh, (MeshShape{2, -1, 1, 2}));
    // Dark axis colours in the view: tp cells use the dark tp hue family.
    w.set_mode(Mode::plan);
    w.plan_page()->view()->set_group_kind(GroupKind::tp);
    QCOMPARE(w.plan_page()->view()->cell_fill(0), group_shade(GroupKind::tp, 0, 4, true));
    w.set_dark(false);
    QVERIFY(!is_dark());
    QCOMPARE(w.plan_page()->view()->cell_fill(0), group_shade(GroupKind::tp, 0, 4, false));
    QSettings().clear();
  }

  void scalesTo64NodesBy8() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_gpu_cluster(w, 64, 8);
    RunConfig c = base_config(w, "llama-3.1-70b");
    c.mesh = MeshShape{8, 8, 1, 8};
    c.training.global_batch = 512;
    w.plan()->set_config(c);
    MeshView* view = w.plan_page()->view();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(view->world_size(), 512);
    // Every cell is on screen, inside the view, and no two overlap (checked on neighbours).
    for (int r = 0; r < 512; ++r) {
      const QRectF cell = view->cell_rect(r);
      QVERIFY(cell.width() >= 6 && cell.height() >= 6);
      QVERIFY(QRectF(view->rect()).contains(cell));
      if (r > 0) QVERIFY(!cell.intersects(view->cell_rect(r - 1)));
    }
    QElapsedTimer t;
    t.start();
    view->repaint();
    qInfo("64x8 mesh view repaint: %lld ms", static_cast<long long>(t.elapsed()));
  }
};

QTEST_MAIN(WorkbenchTest)
#include "workbench_test.moc"
