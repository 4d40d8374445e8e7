// The workbench's side of the ecosystem's configs: an Axolotl / torchtitan / Accelerate file
// imported into the Plan view, and the planned shape exported, with the tool's refusal shown in
// place of a file it could not run (real widgets, offscreen).
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include "test_support.h"
#include "ui/ecosystem_export_dialog.h"
#include "ui/mesh_editor.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
// The import lists unused keys in a message box: close it as a user would.
void accept_message_boxes() {
  QTimer::singleShot(0, [] {
    for (QWidget* tl : QApplication::topLevelWidgets())
      if (auto* box = qobject_cast<QMessageBox*>(tl)) box->accept();
  });
}
}  // namespace

class EcosystemConfigTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void importedAxolotlConfigFillsThePlan() {
    MainWindow w(false);
    test::set_gpu_cluster(w, 1, 8);
    accept_message_boxes();
    QVERIFY(w.import_ecosystem_config(QStringLiteral(MESHWORK_INTEROP_DATA "/axolotl_nd_parallel.yaml")));
    const RunConfig& c = w.plan()->config();
    QCOMPARE(c.mesh, (MeshShape{1, 2, 2, 2}));
    QVERIFY(c.model == nlohmann::json("llama-3.1-8b"));
    QCOMPARE(c.training.seq_len, 2048);
    QCOMPARE(c.training.global_batch, 8);  // micro 1 x accumulation 4 x dp 2
    QCOMPARE(c.training.precision, Precision::bf16);
    QCOMPARE(c.training.activation_checkpointing, ActivationCheckpointing::full);
    QVERIFY(w.plan()->mesh().has_value());
    QCOMPARE(w.plan_page()->editor()->axis_combo(Axis::tp)->currentData().toInt(), 2);
  }

  void badConfigIsRefusedWithFileLineAndKeyAndChangesNothing() {
    MainWindow w(false);
    test::set_gpu_cluster(w, 1, 8);
    const MeshShape before = w.plan()->config().mesh;
    QTemporaryDir dir;
    QFile bad(dir.filePath("titan.toml"));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write("[parallelism]\ntensor_parallel_degree = \"two\"\n");
    bad.close();
    QString shown;
    QTimer::singleShot(0, [&shown] {
      for (QWidget* tl : QApplication::topLevelWidgets())
        if (auto* box = qobject_cast<QMessageBox*>(tl)) {
          shown = box->text();
          box->accept();
        }
    });
    QVERIFY(!w.import_ecosystem_config(bad.fileName()));
    QVERIFY2(shown.contains("titan.toml:2") && shown.contains("parallelism.tensor_parallel_degree"), qPrintable(shown));
    QCOMPARE(w.plan()->config().mesh, before);
  }

  void exportShowsTheFileOrTheToolsRefusal() {
    MainWindow w(false);
    test::set_gpu_cluster(w, 2, 8);
    RunConfig c = w.plan()->config();
    c.model = "llama-3.2-1b";
    c.mesh = MeshShape{2, 4, 1, 2};
    c.training.seq_len = 2048;
    c.training.micro_batch = 1;
    c.training.global_batch = 64;
    c.training.precision = Precision::bf16;
    c.training.device = DeviceKind::cuda;
    w.plan()->set_config(c);
    auto request = w.ecosystem_export_request();
    QVERIFY2(request.ok(), request.ok() ? "" : request.error().message().c_str());
    QCOMPARE(request->num_machines, 2);
    QCOMPARE(request->processes_per_machine, 8);
    QCOMPARE(request->main_address, std::string("gpu0"));

    EcosystemExportDialog dialog(*request);
    dialog.set_format(interop::ConfigFormat::accelerate);
    QVERIFY(dialog.can_save());
    QVERIFY(dialog.preview_text().contains("parallelism_config_tp_size: 2"));
    QVERIFY(dialog.preview_text().contains("num_processes: 16"));
    QVERIFY(dialog.message_text().contains("--machine_rank 1 --main_process_ip gpu0"));
    dialog.set_format(interop::ConfigFormat::torchtitan);
    QVERIFY(dialog.preview_text().contains("tensor_parallel_degree = 2"));
    QTemporaryDir dir;
    const QString path = dir.filePath("torchtitan.toml");
    QVERIFY(dialog.message_text().contains("--job.config_file torchtitan.toml"));
    QVERIFY(dialog.save_to(path));
    auto back = interop::import_config(path.toStdString());
    QVERIFY(back.ok());
    QCOMPARE(*back->mesh, (MeshShape{2, 4, 1, 2}));
    // Saved: the launch lines now name the file written, ready to copy; another format does not.
    QVERIFY2(dialog.message_text().contains("--job.config_file " + path), qPrintable(dialog.message_text()));
    QVERIFY(dialog.message_text().startsWith("Saved " + path));
    dialog.set_format(interop::ConfigFormat::accelerate);
    QVERIFY2(dialog.message_text().contains("--config_file accelerate_config.yaml"), qPrintable(dialog.message_text()));

    // Pure replication with tp: meshtrain runs it, Accelerate and torchtitan do not: no file.
    c.mesh = MeshShape{8, 1, 1, 2};
    w.plan()->set_config(c);
    auto refused = w.ecosystem_export_request();
    QVERIFY(refused.ok());
    EcosystemExportDialog refusal(*refused);
    refusal.set_format(interop::ConfigFormat::accelerate);
    QVERIFY(!refusal.can_save());
    QVERIFY(refusal.preview_text().isEmpty());
    QVERIFY2(refusal.message_text().contains("Accelerate refuses"), qPrintable(refusal.message_text()));
    QVERIFY(!refusal.save_to(dir.filePath("never.yaml")));
    QVERIFY(!QFile::exists(dir.filePath("never.yaml")));
  }
};

QTEST_MAIN(EcosystemConfigTest)
#include "ecosystem_config_test.moc"
