// Other tools' runs in the workbench, written by the real writers at test time
// (tests/interop/write_foreign_runs.py: torch.utils.tensorboard's SummaryWriter, transformers'
// TrainerState): an event file or a whole log directory dropped on the Runs view becomes a run
// beside meshtrain's, compared with what it lacks shown as not recorded; followed, a file or a
// directory still being written is read on as it grows, new files in it (a restarted tracker,
// a rewritten trainer_state.json) included, every point once.
#include <QApplication>
#include <QCheckBox>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QMimeData>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>
#include <algorithm>
#include <cstdlib>

#include "test_support.h"
#include "ui/bar_chart.h"
#include "ui/compare_page.h"
#include "ui/main_window.h"
#include "ui/mesh_thumb.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
const QString kData = QStringLiteral(MESHWORK_UI_TEST_DATA);
const QString kWriter = QStringLiteral(MESHWORK_SOURCE_DIR "/tests/interop/write_foreign_runs.py");

// Runs the real writer: write_foreign_runs.py MODE ARGS...
bool run_writer(const QStringList& args) {
  QString cmd = QStringLiteral(MESHWORK_PYTHON) + " " + kWriter;
  for (const QString& a : args) cmd += " '" + a + "'";
  return std::system(cmd.toLocal8Bit().constData()) == 0;
}

// Drops `path` (a file or a directory) on the Runs page as a file manager would.
bool drop(RunsPage* page, const QString& path) {
  auto* mime = new QMimeData;
  mime->setUrls({QUrl::fromLocalFile(path)});
  QDragEnterEvent enter(QPoint(50, 50), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(page, &enter);
  if (!enter.isAccepted()) return false;
  QDropEvent dropped(QPointF(50, 50), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(page, &dropped);
  delete mime;
  return true;
}
}  // namespace

class ForeignRunsTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  QString db_;
  int db_n_ = 0;

  void fresh_db() {
    db_ = dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_n_));
    qputenv("MESHWORK_DB", db_.toLocal8Bit());
  }
  qint64 import(RunsPage* page, const QString& path, bool follow) {
    const int before = page->model()->rowCount();
    page->import_metrics(path, follow);
    if (!QTest::qWaitFor([&] { return page->model()->rowCount() > before; }, 20000)) return 0;
    return newest(page);
  }
  static qint64 newest(RunsPage* page) {
    qint64 id = 0;
    for (const auto& s : page->model()->runs()) id = std::max<qint64>(id, s.id);
    return id;
  }
  // Points of `key` stored for `run` (every rank), read from the store file itself.
  int64_t points(qint64 run, const std::string& key) {
    auto st = store::RunStore::open(db_.toStdString());
    if (!st.ok()) return -1;
    store::SeriesQuery q;
    q.runs = {run};
    q.key = key;
    auto r = (*st)->query_series(q);
    int64_t n = 0;
    if (r.ok())
      for (const auto& s : *r) n += s.source_points;
    return n;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    QVERIFY2(QFile::exists(kData + "/fsdp-1x2.jsonl"), qPrintable(kData));
  }

  // An event file written by torch.utils.tensorboard's SummaryWriter, dropped on the Runs view,
  // becomes a run beside a meshtrain run: its loss under Meshwork's name, and what TensorBoard
  // lacks (per-axis communication) absent, never zero.
  void droppedTensorBoardRunIsStoredBesideMeshtrainRuns() {
    fresh_db();
    QTemporaryDir tb;
    QVERIFY(run_writer({"events", tb.path()}));
    const QStringList files = QDir(tb.path()).entryList({"events.out.tfevents.*"}, QDir::Files);
    QCOMPARE(files.size(), 1);
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    QVERIFY(import(page, kData + "/fsdp-1x2.jsonl", false) > 0);
    const int before = page->model()->rowCount();
    QMimeData mime_data;  // the events only point at it
    QMimeData* mime = &mime_data;
    mime->setUrls({QUrl::fromLocalFile(tb.filePath(files[0]))});
    QDragEnterEvent enter(QPoint(50, 50), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(page, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(50, 50), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(page, &drop);
    QVERIFY(QTest::qWaitFor([&] { return page->model()->rowCount() > before; }, 20000));
    qint64 id = 0;
    for (const auto& r : page->model()->runs()) id = std::max<qint64>(id, r.id);
    auto st = store::RunStore::open(db_.toStdString());
    QVERIFY(st.ok());
    auto info = (*st)->get_run(id);
    QVERIFY(info.ok());
    QCOMPARE(QString::fromStdString(info->summary.name), QFileInfo(tb.path()).fileName());
    QCOMPARE(QString::fromStdString(info->config.value("source_format", "")), QStringLiteral("tensorboard"));
    QCOMPARE(QString::fromStdString(info->summary.status), QStringLiteral("ok"));
    store::SeriesQuery q;
    q.runs = {id};
    q.key = "loss";
    auto loss = (*st)->query_series(q);
    QVERIFY2(loss.ok(), loss.ok() ? "" : loss.error().message().c_str());
    size_t points = 0;
    for (const auto& series : *loss) points += static_cast<size_t>(series.source_points);
    QCOMPARE(points, size_t(40));  // the 40 steps of train/loss
    q.key = "comm_s.dp_shard";
    auto comm = (*st)->query_series(q);
    size_t comm_points = 0;
    if (comm.ok())
      for (const auto& series : *comm) comm_points += static_cast<size_t>(series.source_points);
    QCOMPARE(comm_points, size_t(0));
    // Compare: both runs' losses drawn; the TensorBoard run's communication is "not recorded".
    const qint64 meshtrain_id = id - 1;
    page->select_runs({meshtrain_id, id});
    Q_EMIT page->compare_requested(page->selected_runs());
    ComparePage* c = w.compare_page();
    QTRY_COMPARE(c->series_count(), 2);
    QTRY_COMPARE(c->comm_chart()->categories().size(), qsizetype(2));
    QCOMPARE(c->comm_chart()->categories()[1], QStringLiteral("%1 #%2").arg(QFileInfo(tb.path()).fileName()).arg(id));
    // "not recorded" sits in the TensorBoard run's own column, whole: inside the plot area and
    // inside that run's half of it (not an axis label elided or cut to one line).
    const auto notes = c->comm_chart()->absent_notes();
    QCOMPARE(notes.size(), size_t(1));
    QCOMPARE(notes[0].category, 1);
    QCOMPARE(notes[0].text, QStringLiteral("not recorded"));
    const QRectF plot = c->comm_chart()->chart()->plotArea();
    QVERIFY2(plot.contains(notes[0].rect), qPrintable(QStringLiteral("%1,%2 %3x%4 outside the plot")
                                                          .arg(notes[0].rect.x()).arg(notes[0].rect.y())
                                                          .arg(notes[0].rect.width()).arg(notes[0].rect.height())));
    QVERIFY(notes[0].rect.left() >= plot.center().x());
    QFont small = c->comm_chart()->font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    QVERIFY(notes[0].rect.width() >= QFontMetricsF(small).horizontalAdvance("not recorded"));
    // The thumbnails: the meshtrain run's shape drawn, the TensorBoard run's "not recorded",
    // never an invented 1×1×1×1 of 1 rank.
    QList<MeshThumb*> thumbs;
    QTRY_COMPARE((thumbs = c->findChildren<MeshThumb*>()).size(), qsizetype(2));
    std::sort(thumbs.begin(), thumbs.end(), [](MeshThumb* a, MeshThumb* b) { return a->x() < b->x(); });
    QVERIFY(thumbs[0]->shape().has_value());
    QCOMPARE(thumbs[0]->caption(), QStringLiteral("1×2×1×1  ·  2 ranks"));
    QVERIFY(!thumbs[1]->shape().has_value());
    QCOMPARE(thumbs[1]->caption(), QStringLiteral("shape not recorded"));
    QVERIFY(!thumbs[1]->toolTip().contains("1×1×1×1"));
  }

  // A TensorBoard run still writing, followed: the cut last record waits, the rest of the file
  // arrives later and is read on from the stored offset, every scalar once.
  void followedTensorBoardFileReadsOnAsItGrows() {
    fresh_db();
    QTemporaryDir tb, live;
    QVERIFY(run_writer({"events", tb.path()}));
    const QString name = QDir(tb.path()).entryList({"events.out.tfevents.*"}, QDir::Files).value(0);
    QFile whole(tb.filePath(name));
    QVERIFY(whole.open(QIODevice::ReadOnly));
    const QByteArray bytes = whole.readAll();
    const QString path = live.filePath(name);
    auto write = [&](qsizetype n) {
      QFile out(path);
      QVERIFY(out.open(QIODevice::WriteOnly | QIODevice::Truncate));
      out.write(bytes.left(n));
    };
    write(bytes.size() / 2 + 3);  // half the records and a cut one
    MainWindow w(false);
    RunsPage* page = w.runs_page();
    const qint64 id = import(page, path, true);
    QVERIFY(id > 0);
    auto loss_points = [&]() -> int64_t {
      auto st = store::RunStore::open(db_.toStdString());
      if (!st.ok()) return -1;
      store::SeriesQuery q;
      q.runs = {id};
      q.key = "loss";
      auto r = (*st)->query_series(q);
      int64_t n = 0;
      if (r.ok())
        for (const auto& s : *r) n += s.source_points;
      return n;
    };
    QTRY_VERIFY_WITH_TIMEOUT(loss_points() > 0, 20000);
    QVERIFY(loss_points() < 40);
    write(bytes.size());  // the writer goes on
    QTRY_COMPARE_WITH_TIMEOUT(loss_points(), int64_t(40), 20000);
  }

  // A TensorBoard log directory dropped with "Follow dropped runs" on: imported as one run named
  // after the directory; the tracker then restarts (a new process, a new event file in the same
  // directory) and its steps arrive too, every one once.
  void droppedTensorBoardFolderIsFollowedAcrossATrackerRestart() {
    fresh_db();
    QTemporaryDir root;
    const QString logdir = root.filePath("accelerate-logs");
    QVERIFY(QDir().mkpath(logdir + "/llama"));  // trackers write a subdirectory per project
    QVERIFY(run_writer({"events-steps", logdir + "/llama", "0", "20"}));
    MainWindow w(false);
    RunsPage* page = w.runs_page();
    page->follow_drops()->setChecked(true);
    const int before = page->model()->rowCount();
    QVERIFY(drop(page, logdir));
    QVERIFY(QTest::qWaitFor([&] { return page->model()->rowCount() > before; }, 20000));
    const qint64 id = newest(page);
    QCOMPARE(QString::fromStdString(page->model()->find(id)->name), QStringLiteral("accelerate-logs"));
    QTRY_COMPARE_WITH_TIMEOUT(points(id, "loss"), int64_t(20), 20000);
    QVERIFY(page->model()->following_files());
    // The restart: a second event file beside the first, steps 20..39.
    QVERIFY(run_writer({"events-steps", logdir + "/llama", "20", "40"}));
    QCOMPARE(QDir(logdir + "/llama").entryList({"events.out.tfevents.*"}, QDir::Files).size(), qsizetype(2));
    QTRY_COMPARE_WITH_TIMEOUT(points(id, "loss"), int64_t(40), 20000);
    QTRY_COMPARE_WITH_TIMEOUT(points(id, "lr"), int64_t(40), 20000);
    QCOMPARE(page->model()->rowCount(), before + 1);  // one run, not one per file
    // Read again and again while followed: nothing stored twice.
    QTest::qWait(800);
    QCOMPARE(points(id, "loss"), int64_t(40));
    auto st = store::RunStore::open(db_.toStdString());
    QVERIFY(st.ok());
    auto info = (*st)->get_run(id);
    QVERIFY(info.ok());
    QCOMPARE(QString::fromStdString(info->config.value("source_format", "")), QStringLiteral("tensorboard"));
  }

  // A Trainer output_dir: dropped (not followed) it is imported and finished; dropped again with
  // follow on it is the same run, and each rewrite of trainer_state.json (Trainer rewrites the
  // whole file at every save) and a new checkpoint-N/trainer_state.json are read, once.
  void followedTrainerOutputDirPicksUpTrainerStateUpdates() {
    fresh_db();
    QTemporaryDir root;
    const QString out = root.filePath("hf-output");
    QVERIFY(QDir().mkpath(out));
    QVERIFY(run_writer({"trainer-state-upto", out + "/trainer_state.json", "50"}));
    MainWindow w(false);
    RunsPage* page = w.runs_page();
    const int before = page->model()->rowCount();
    QVERIFY(drop(page, out));
    QVERIFY(QTest::qWaitFor([&] { return page->model()->rowCount() > before; }, 20000));
    const qint64 id = newest(page);
    QTRY_COMPARE_WITH_TIMEOUT(points(id, "loss"), int64_t(5), 20000);
    QCOMPARE(points(id, "eval_loss"), int64_t(1));
    QTRY_COMPARE(QString::fromStdString(page->model()->find(id)->status), QStringLiteral("ok"));
    QVERIFY(!page->model()->following_files());
    // Dropped again, followed: the directory is that run (its origin), not a second one.
    page->follow_drops()->setChecked(true);
    QVERIFY(drop(page, out));
    QTRY_VERIFY_WITH_TIMEOUT(page->model()->following_files(), 20000);
    QCOMPARE(page->model()->rowCount(), before + 1);
    QVERIFY(run_writer({"trainer-state-upto", out + "/trainer_state.json", "100"}));
    QTRY_COMPARE_WITH_TIMEOUT(points(id, "loss"), int64_t(10), 20000);
    QTRY_COMPARE_WITH_TIMEOUT(points(id, "eval_loss"), int64_t(2), 20000);
    QCOMPARE(points(id, "lr"), int64_t(10));
    // A checkpoint's copy of the same history appears: read, and nothing is stored twice.
    QVERIFY(run_writer({"trainer-state-upto", out + "/checkpoint-100/trainer_state.json", "100"}));
    QTest::qWait(1000);
    QCOMPARE(points(id, "loss"), int64_t(10));
    QCOMPARE(page->model()->rowCount(), before + 1);
  }
};

QTEST_MAIN(ForeignRunsTest)
#include "foreign_runs_test.moc"
