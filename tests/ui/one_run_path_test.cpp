// One shape, one run path, seen from the three front ends a user has: the workbench, `meshwork`
// (launch and plan) and `meshtrain` itself.
//  - threeLaunchPathsShipTheSameRunConfig: the workbench's Launch, `meshwork launch` with flags
//    and `meshwork launch --config` for the same inputs put byte-identical run_config.json files
//    on the node and start the same meshtrain command line; each rank reports that config. In the
//    workbench the run's basics (name, steps, learning rate, warmup) are typed into the editor.
//  - shapeTableIsJudgedAlikeEverywhere: 38 shapes that `meshwork plan`, the mesh editor and
//    `meshtrain --check` accept and refuse identically, with the same words.
#include <QAction>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <set>
#include <sstream>

#include "core/metrics.h"
#include "core/planner.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "test_support.h"
#include "ui/launch_controller.h"
#include "ui/mesh_editor.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

struct Ran {
  int code = -1;
  QString out, err;
};

Ran run(const QString& program, const QStringList& args) {
  QProcess p;
  p.start(program, args);
  Ran r;
  if (!p.waitForFinished(300000)) return r;
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromLocal8Bit(p.readAllStandardOutput());
  r.err = QString::fromLocal8Bit(p.readAllStandardError());
  return r;
}

QString bin(const char* name) { return QStringLiteral(MESHWORK_BIN_DIR "/") + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The lines a front end printed after its "<program>: " prefix.
QStringList error_lines(const QString& text, const QString& program) {
  QStringList out;
  for (const QString& line : text.split('\n', Qt::SkipEmptyParts))
    if (line.startsWith(program + ": ")) out << line.mid(program.size() + 2);
  return out;
}

// Every visible message the mesh editor shows (per-field labels and the others).
QStringList shown_messages(const MeshEditor* editor) {
  QStringList out;
  for (const QLabel* l : editor->findChildren<QLabel*>())
    if (l->isVisible() && (l->property("role") == "error" || l->property("role") == "warning") && !l->text().isEmpty())
      out << l->text().remove(QChar(0x200B));  // the invisible line-break hints the label adds
  return out;
}

}  // namespace

class OneRunPathTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  // The run of the test: a non-default shape (tp 2) and non-default training, lr 1e-7.
  RunConfig exact_config(RunConfig c) const {
    c.name = "one-path";
    c.model = "tiny";
    c.data = nullptr;
    c.mesh = MeshShape{1, 1, 1, 2};
    TrainingConfig& t = c.training;
    t.steps = 2;
    t.seq_len = 64;
    t.global_batch = 4;
    t.micro_batch = 2;
    t.lr = 1e-7;
    t.warmup_steps = 1;
    t.seed = 99;
    t.precision = Precision::fp32;
    t.activation_checkpointing = ActivationCheckpointing::none;
    t.device = DeviceKind::cpu;
    t.checkpoint_every = 0;
    t.sequence_parallel = false;
    t.fsdp_grad_sync = FsdpGradSync::step;
    t.max_grad_norm = 0.5;
    t.peak_tflops = 0;
    return c;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    // Run directories under the temporary directory (the launcher's root is relative to HOME).
    qputenv("HOME", dir_.path().toLocal8Bit());
  }

  void threeLaunchPathsShipTheSameRunConfig() {
    const QString db = dir_.filePath("runs.db");
    RunConfig config;
    {
      // 1. The workbench: the plan's config on the local node, the Launch action.
      MainWindow w(false);
      w.resize(1300, 850);
      w.show();
      test::set_local_cluster(w, 2);
      config = exact_config(w.plan()->config());
      // Everything but the run's basics from the test; those the user types, as the editor shows them.
      RunConfig without_basics = config;
      const RunConfig defaults = w.plan()->config();
      without_basics.name = defaults.name;
      without_basics.training.steps = defaults.training.steps;
      without_basics.training.lr = defaults.training.lr;
      without_basics.training.warmup_steps = defaults.training.warmup_steps;
      w.plan()->set_config(without_basics);
      MeshEditor* editor = w.plan_page()->editor();
      const auto type_into = [&](const char* field, const QString& text) {
        QWidget* control = editor->control(field);
        QVERIFY2(control, field);
        QLineEdit* edit = qobject_cast<QLineEdit*>(control);
        if (!edit) edit = control->findChild<QLineEdit*>();  // a spin box's editor
        QVERIFY2(edit, field);
        edit->setFocus();
        edit->selectAll();
        QTest::keyClicks(edit, text);
        QTest::keyClick(edit, Qt::Key_Return);
      };
      type_into("name", "one-path");
      type_into("steps", "2");
      type_into("lr", "1e-7");
      type_into("warmup_steps", "1");
      QCOMPARE(QString::fromStdString(to_json(w.plan()->config()).dump()), QString::fromStdString(to_json(config).dump()));
      // A wrong learning rate is refused under its field, in the file's words, and changes nothing.
      type_into("lr", "0");
      QCOMPARE(editor->message_for("lr"), QStringLiteral("0: must be a number in (0, 10]"));
      QCOMPARE(w.plan()->config().training.lr, 1e-7);
      type_into("lr", "1e-7");
      QVERIFY(editor->message_for("lr").isEmpty());
      // A default run is long enough to watch.
      QVERIFY(defaults.training.steps >= 500);
      w.set_mode(Mode::plan);
      QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));
      QSignalSpy launched(w.launcher(), &LaunchController::launched);
      QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
      QSignalSpy finished(w.launcher(), &LaunchController::finished);
      w.launch_action()->trigger();
      QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 120000);
      QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
      QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 240000);
      QCOMPARE(finished.first().at(1).toString(), QStringLiteral("ok"));
    }
    // 2. `meshwork launch` with flags, as a user types them.
    const QStringList common = {"--db", db, "--meshtrain", QStringLiteral(MESHWORK_MESHTRAIN_BIN)};
    Ran flags = run(bin("meshwork"),
                    QStringList{"launch", "--local", "--nproc-per-node", "2", "--name", "one-path", "--model", "tiny",
                                "--tp", "2", "--steps", "2", "--seq-len", "64", "--global-batch", "4",
                                "--micro-batch", "2", "--lr", "1e-7", "--warmup-steps", "1", "--seed", "99",
                                "--sequence-parallel", "off", "--fsdp-grad-sync", "step", "--max-grad-norm", "0.5"} +
                        common);
    QVERIFY2(flags.code == 0, qPrintable(flags.err));
    // 3. `meshwork launch --config F` with the workbench's config saved as F.
    const std::string file = dir_.filePath("F.json").toStdString();
    QVERIFY(save_run_config(config, file).ok());
    Ran from_file = run(bin("meshwork"), QStringList{"launch", "--config", QString::fromStdString(file)} + common);
    QVERIFY2(from_file.code == 0, qPrintable(from_file.err));

    auto store = store::RunStore::open(db.toStdString());
    QVERIFY(store.ok());
    auto runs = (*store)->list_runs();
    QVERIFY(runs.ok());
    QCOMPARE(runs->size(), size_t{3});
    std::set<std::string> shipped, commands;
    for (const auto& summary : *runs) {
      QCOMPARE(QString::fromStdString(summary.status), QStringLiteral("ok"));
      auto info = (*store)->get_run(summary.id);
      QVERIFY(info.ok());
      auto rec = remote::launch_record_from_json(info->cluster.at("launch"));
      QVERIFY(rec.ok());
      QCOMPARE(rec->nodes.size(), size_t{1});
      const std::string text = read_file(rec->nodes[0].run_dir + "/run_config.json");
      QVERIFY(!text.empty());
      shipped.insert(text);
      // The command the node ran, with its (randomly chosen) port left out.
      nlohmann::json command = info->cluster["launch"]["nodes"][0]["command"];
      QVERIFY(command.is_array());
      for (size_t i = 0; i + 1 < command.size(); ++i)
        if (command[i] == "--master-port") command[i + 1] = "PORT";
      commands.insert(command.dump());
      QVERIFY2(command.dump().find("\"--config\",\"run_config.json\"") != std::string::npos, command.dump().c_str());
      // Every rank ran exactly that config: its start record reports the file's document.
      const nlohmann::json doc = nlohmann::json::parse(text);
      for (int rank = 0; rank < 2; ++rank) {
        std::istringstream lines(read_file(rec->nodes[0].run_dir + "/metrics-rank" + std::to_string(rank) + ".jsonl"));
        std::string line;
        bool saw_start = false;
        while (std::getline(lines, line)) {
          auto r = parse_metrics_line(line);
          QVERIFY(r.ok());
          if (auto* s = std::get_if<StartRecord>(&*r)) {
            QCOMPARE(QString::fromStdString(s->config.dump()), QString::fromStdString(doc.dump()));
            saw_start = true;
          }
          if (auto* s = std::get_if<StepRecord>(&*r); s && s->step == 0) QCOMPARE(s->lr, 1e-7);
        }
        QVERIFY(saw_start);
      }
    }
    QCOMPARE(shipped.size(), size_t{1});  // byte-identical on the node
    QCOMPARE(commands.size(), size_t{1});  // the same meshtrain command line
    // And it is the config the user gave (the nodes and name as the launcher writes them).
    RunConfig expected = config;
    expected.nodes = {NodeConfig{"local", 2, {}}};
    QCOMPARE(QString::fromStdString(*shipped.begin()),
             QString::fromStdString(to_json(expected).dump(2) + "\n"));
  }

  void shapeTableIsJudgedAlikeEverywhere() {
    struct Case {
      int nodes, per_node;
      MeshShape shape;
      int seq_len, global_batch, micro_batch;
    };
    std::vector<Case> cases;
    // Every factorization of 4 ranks on one node, and of 8 on two nodes of 4 (tiny: 8 heads,
    // 4 kv heads, intermediate 128, vocab 256): dp_replicate x tp without dp_shard among them.
    for (const MeshShape& s : enumerate_shapes(4, MeshShape{0, 0, 0, 0})) cases.push_back({1, 4, s, 64, 8, 1});
    for (const MeshShape& s : enumerate_shapes(8, MeshShape{0, 0, 0, 0})) cases.push_back({2, 4, s, 48, 4, 1});
    cases.push_back({1, 4, MeshShape{1, 2, 1, 1}, 64, 8, 1});   // product 2 != 4 ranks
    cases.push_back({1, 6, MeshShape{1, 2, 1, 3}, 64, 8, 1});   // tp 3: heads, kv, mlp, vocab, seq
    cases.push_back({1, 4, MeshShape{1, 1, 2, 2}, 12, 8, 1});   // seq 12 not a multiple of 2*cp*tp
    cases.push_back({1, 4, MeshShape{2, 2, 1, 1}, 64, 6, 1});   // global batch 6 over 4 dp ranks
    cases.push_back({2, 4, MeshShape{1, 1, 4, 2}, 40, 4, 1});   // seq 40 not a multiple of 16
    cases.push_back({1, 4, MeshShape{1, 3, 1, 1}, 64, 8, 1});   // product 3 does not divide 4
    cases.push_back({1, 4, MeshShape{1, 1, 1, 4}, 64, 8, 3});   // global batch 8, micro-batch 3
    cases.push_back({1, 4, MeshShape{1, 1, 1, 4}, 30, 8, 1});   // seq 30 not a multiple of tp
    QVERIFY(cases.size() >= 30);

    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    int accepted = 0, refused = 0;
    bool pure_replication_with_tp_runs = false;
    for (const Case& c : cases) {
      const QString label = QString::fromStdString(c.shape.compact()) + QStringLiteral(" on %1x%2, seq %3, batch %4")
                                                                          .arg(c.nodes).arg(c.per_node).arg(c.seq_len).arg(c.global_batch);
      QStringList shape_flags;
      for (Axis a : kAxes) shape_flags << QString::fromUtf8(axis_flag(a).data()) << QString::number(c.shape[a]);
      const QStringList batch_flags = {"--model", "tiny", "--seq-len", QString::number(c.seq_len), "--global-batch",
                                       QString::number(c.global_batch), "--micro-batch", QString::number(c.micro_batch)};
      // meshtrain: every error, one per line.
      Ran trainer = run(bin("meshtrain"), QStringList{"--check", "--nproc-per-node", QString::number(c.per_node),
                                                      "--nnodes", QString::number(c.nodes)} +
                                              batch_flags + shape_flags);
      QVERIFY2(trainer.code == 0 || trainer.code == 2, qPrintable(label + ": " + trainer.err));
      const QStringList trainer_errors = error_lines(trainer.err, "meshtrain");
      // meshwork plan with every axis given: the first refusal.
      Ran plan = run(bin("meshwork"), QStringList{"plan", "--nodes", QString::number(c.nodes), "--gpus-per-node",
                                                  QString::number(c.per_node), "--gpu-memory", "80GiB"} +
                                          batch_flags + shape_flags);
      QVERIFY2(plan.code == 0 || plan.code == 2, qPrintable(label + ": " + plan.err));
      // The workbench: the same config on the same cluster, the editor's messages.
      test::set_gpu_cluster(w, c.nodes, c.per_node);
      RunConfig config = w.plan()->config();
      config.model = "tiny";
      config.mesh = c.shape;
      config.training.seq_len = c.seq_len;
      config.training.global_batch = c.global_batch;
      config.training.micro_batch = c.micro_batch;
      w.plan()->set_config(config);
      QStringList editor_errors;
      for (const Diagnostic& d : w.plan()->diagnostics())
        if (is_error(d)) editor_errors << QString::fromStdString(d.text());
      const QStringList shown = shown_messages(w.plan_page()->editor());

      const bool trainer_ok = trainer.code == 0;
      QVERIFY2(trainer_ok == (plan.code == 0), qPrintable(label + ": plan " + plan.err + " / meshtrain " + trainer.err));
      QVERIFY2(trainer_ok == !w.plan()->has_errors(), qPrintable(label + ": " + editor_errors.join(" | ")));
      if (trainer_ok) {
        ++accepted;
        pure_replication_with_tp_runs |= c.shape == MeshShape{2, 1, 1, 2};
        QVERIFY2(trainer_errors.isEmpty() && editor_errors.isEmpty(), qPrintable(label));
        continue;
      }
      ++refused;
      QVERIFY2(!trainer_errors.isEmpty(), qPrintable(label));
      QCOMPARE(editor_errors, trainer_errors);                              // the same words, in order
      QCOMPARE(error_lines(plan.err, "meshwork"), QStringList{trainer_errors.first()});  // plan: the first
      for (const Diagnostic& d : w.plan()->diagnostics()) {
        if (!is_error(d)) continue;
        const QString words = QString::fromStdString(d.value + ": " + d.message);
        bool on_screen = false;
        for (const QString& s : shown) on_screen = on_screen || s.contains(words);
        QVERIFY2(on_screen, qPrintable(label + ": not shown: " + words + " in " + shown.join(" | ")));
      }
    }
    // The table covers both outcomes, and dp_replicate 2 x tp 2 (no dp_shard) runs.
    QVERIFY2(accepted >= 10 && refused >= 10, qPrintable(QStringLiteral("%1 accepted, %2 refused").arg(accepted).arg(refused)));
    QVERIFY(pure_replication_with_tp_runs);
  }
};

QTEST_MAIN(OneRunPathTest)
#include "one_run_path_test.moc"
