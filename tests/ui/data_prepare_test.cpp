// The workbench's data field and its "Prepare data…" dialog on the offscreen platform: the real
// `meshwork data prepare` runs behind the dialog (QProcess), with a tokenizer trained by the real
// `tokenizers` library (tests/core/data/reference.py).
#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/data_picker.h"
#include "ui/mesh_editor.h"
#include "ui/plan_state.h"
#include "ui/prepare_data_dialog.h"

using namespace meshwork;
using namespace meshwork::ui;

class DataPrepareTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  QString path(const QString& name) const { return dir_.filePath(name); }

  // `mb` megabytes of paragraphs (deterministic), so the run lasts long enough to show progress.
  void write_text(const QString& name, int mb) {
    QFile f(path(name));
    QVERIFY(f.open(QIODevice::WriteOnly));
    QByteArray para;
    for (int i = 0; i < 40; ++i) para += "The quick brown fox jumps over the lazy dog, caf\xc3\xa9 \xf0\x9f\x98\x80 " + QByteArray::number(i) + ". ";
    para += "\n\n";
    while (f.size() < qint64(mb) * 1000 * 1000) f.write(para);
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    QVERIFY(dir_.isValid());
    const int rc = QProcess::execute(QStringLiteral(MESHWORK_TEST_PYTHON),
                                     {QStringLiteral(REFERENCE_PY), "train-bpe", path("tok")});
    QCOMPARE(rc, 0);
    write_text("small.txt", 10);
    write_text("big.txt", 40);
  }

  // Start → the bar moves through intermediate values to full, the status names the result,
  // and the picker takes the new directory with its manifest's summary.
  void prepareDialogShowsProgressAndSetsTheData() {
    PlanState state;
    MeshEditor editor(&state);
    DataPicker* picker = editor.data_picker();
    picker->set_program(QStringLiteral(MESHWORK_BIN));
    PrepareDataDialog* dlg = picker->open_prepare_dialog();
    dlg->set_tokenizer(path("tok"));
    dlg->set_inputs({path("small.txt")});
    dlg->set_output(path("out"));
    QList<int> values;
    connect(dlg->progress_bar(), &QProgressBar::valueChanged, this, [&](int v) { values << v; });
    QSignalSpy prepared(dlg, &PrepareDataDialog::prepared);
    QTest::mouseClick(dlg->start_button(), Qt::LeftButton);
    QCOMPARE(dlg->state(), PrepareDataDialog::State::running);
    QVERIFY(!dlg->start_button()->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(dlg->state() != PrepareDataDialog::State::running, 120000);
    QCOMPARE(dlg->state(), PrepareDataDialog::State::done);
    QVERIFY2(dlg->error_text().isEmpty(), qPrintable(dlg->error_text()));
    QCOMPARE(prepared.count(), 1);
    QCOMPARE(prepared[0][0].toString(), QDir(path("out")).absolutePath());
    QCOMPARE(values.last(), dlg->progress_bar()->maximum());
    bool intermediate = false;
    for (int v : values) intermediate |= v > 0 && v < dlg->progress_bar()->maximum();
    QVERIFY2(intermediate, "the bar showed no value between empty and full");
    QVERIFY2(dlg->status_text().startsWith("Prepared: "), qPrintable(dlg->status_text()));
    QVERIFY(dlg->status_text().contains(" documents, tokenizer.json (vocab "));
    QVERIFY(QFile::exists(path("out/manifest.json")));
    // The run config's data is the new directory, and the picker shows its summary.
    QCOMPARE(QString::fromStdString(state.config().data.get<std::string>()), QDir(path("out")).absolutePath());
    QTRY_VERIFY(picker->summary().contains(" tokens, "));
    QVERIFY2(picker->summary().contains(" documents, tokenizer.json (vocab "), qPrintable(picker->summary()));
    QCOMPARE(picker->path_edit()->text(), QDir(path("out")).absolutePath());
    // The same inputs again: reused, nothing tokenized.
    QTest::mouseClick(dlg->start_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(dlg->state() != PrepareDataDialog::State::running, 60000);
    QVERIFY2(dlg->status_text().startsWith("Reused (same inputs): "), qPrintable(dlg->status_text()));
  }

  void cancelStopsThePreparation() {
    PrepareDataDialog dlg;
    dlg.set_program(QStringLiteral(MESHWORK_BIN));
    dlg.set_tokenizer(path("tok"));
    dlg.set_inputs({path("big.txt")});
    dlg.set_output(path("cancelled"));
    QTest::mouseClick(dlg.start_button(), Qt::LeftButton);
    // Cancel once tokenizing has begun (a progress event past the hashing share).
    QTRY_VERIFY_WITH_TIMEOUT(dlg.progress_bar()->value() > 50, 60000);
    QVERIFY(dlg.state() == PrepareDataDialog::State::running);
    QTest::mouseClick(dlg.cancel_button(), Qt::LeftButton);
    QCOMPARE(dlg.state(), PrepareDataDialog::State::cancelled);
    QCOMPARE(dlg.status_text(), QStringLiteral("Cancelled"));
    QVERIFY(dlg.start_button()->isEnabled());
    // meshwork stops cleanly on SIGTERM: the worker killed, the unfinished shard and the worker's
    // log removed, no manifest.
    QTRY_VERIFY_WITH_TIMEOUT(QDir(path("cancelled")).entryList(QDir::Files).isEmpty(), 20000);
    QVERIFY(!QFile::exists(path("cancelled/manifest.json")));
  }

  void errorsAreShownInTheCommandsWords() {
    PrepareDataDialog dlg;
    dlg.set_program(QStringLiteral(MESHWORK_BIN));
    dlg.set_tokenizer(path("tok"));
    dlg.set_inputs({path("missing.txt")});
    dlg.set_output(path("never"));
    QTest::mouseClick(dlg.start_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(dlg.state() != PrepareDataDialog::State::running, 60000);
    QCOMPARE(dlg.state(), PrepareDataDialog::State::failed);
    QCOMPARE(dlg.error_text(), "--input: " + path("missing.txt") + ": no such file");
  }

  void pickerDescribesWhatThePathHolds() {
    PlanState state;
    DataPicker picker(&state);
    QTRY_COMPARE(picker.summary(), QStringLiteral("The bundled corpus (KJV text, byte-level tokens)"));
    QVERIFY(QDir().mkpath(path("empty")));
    picker.path_edit()->setText(path("empty"));
    Q_EMIT picker.path_edit()->editingFinished();
    QCOMPARE(QString::fromStdString(state.config().data.get<std::string>()), path("empty"));
    QTRY_COMPARE(picker.summary(), QStringLiteral("no .bin shards here: prepare data into it first"));
    picker.path_edit()->setText(QString());
    Q_EMIT picker.path_edit()->editingFinished();
    QVERIFY(state.config().data.is_null());
  }
};

QTEST_MAIN(DataPrepareTest)
#include "data_prepare_test.moc"
