#include "ui/prepare_data_dialog.h"

#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

namespace meshwork::ui {

namespace {

QString eta_text(double s) {
  if (s >= 3600) return QObject::tr("%1 h %2 min").arg(int(s / 3600)).arg(int(s / 60) % 60);
  if (s >= 60) return QObject::tr("%1 min %2 s").arg(int(s / 60)).arg(int(s) % 60);
  return QObject::tr("%1 s").arg(int(s + 0.5));
}

// A form row of `edit` and a Browse… button (object name `button_name`) that puts the folder
// picked in a dialog titled `caption` into `edit`.
void add_folder_row(QFormLayout* form, const QString& label, QLineEdit* edit, const QString& button_name,
                    const QString& caption) {
  QWidget* parent = edit->parentWidget();
  auto* row = new QHBoxLayout;
  row->addWidget(edit);
  auto* browse = new QPushButton(QObject::tr("Browse…"), parent);
  browse->setObjectName(button_name);
  row->addWidget(browse);
  form->addRow(label, row);
  QObject::connect(browse, &QPushButton::clicked, edit, [edit, parent, caption] {
    const QString d = QFileDialog::getExistingDirectory(parent, caption);
    if (!d.isEmpty()) edit->setText(d);
  });
}

}  // namespace

PrepareDataDialog::PrepareDataDialog(QWidget* parent) : QDialog(parent) {
  setObjectName("PrepareDataDialog");
  setWindowTitle(tr("Prepare data"));
  auto* outer = new QVBoxLayout(this);
  auto* form = new QFormLayout;

  tokenizer_ = new QLineEdit(this);
  tokenizer_->setObjectName("tokenizer");
  tokenizer_->setPlaceholderText(tr("model directory, tokenizer.json or tokenizer.model"));
  add_folder_row(form, tr("Tokenizer"), tokenizer_, "browse_tokenizer", tr("Model or tokenizer directory"));

  inputs_ = new QListWidget(this);
  inputs_->setObjectName("inputs");
  inputs_->setMaximumHeight(100);
  auto* in_col = new QVBoxLayout;
  in_col->addWidget(inputs_);
  auto* in_buttons = new QHBoxLayout;
  auto* add = new QPushButton(tr("Add files…"), this);
  auto* remove = new QPushButton(tr("Remove"), this);
  in_buttons->addWidget(add);
  in_buttons->addWidget(remove);
  in_buttons->addStretch();
  in_col->addLayout(in_buttons);
  form->addRow(tr("Text files"), in_col);
  connect(add, &QPushButton::clicked, this, [this] {
    const QStringList files = QFileDialog::getOpenFileNames(this, tr("Text to train on"), QString(),
                                                            tr("Text (*.txt *.jsonl)"));
    inputs_->addItems(files);
  });
  connect(remove, &QPushButton::clicked, this, [this] { qDeleteAll(inputs_->selectedItems()); });

  text_field_ = new QLineEdit(QStringLiteral("text"), this);
  text_field_->setObjectName("text_field");
  text_field_->setToolTip(tr("The field of each .jsonl line that holds the text"));
  form->addRow(tr("JSON lines field"), text_field_);

  output_ = new QLineEdit(this);
  output_->setObjectName("output");
  add_folder_row(form, tr("Output directory"), output_, "browse_output", tr("Where the shards go"));
  outer->addLayout(form);

  bar_ = new QProgressBar(this);
  bar_->setObjectName("progress");
  bar_->setRange(0, 1000);
  bar_->setValue(0);
  bar_->setTextVisible(true);
  outer->addWidget(bar_);
  status_ = new QLabel(tr("Tokenizes with the model's own tokenizer into llm.c shards; "
                          "the same inputs again reuse the result."),
                       this);
  status_->setObjectName("status");
  status_->setWordWrap(true);
  status_->setProperty("role", "muted");
  outer->addWidget(status_);
  error_ = new QLabel(this);
  error_->setObjectName("error");
  error_->setWordWrap(true);
  error_->setProperty("role", "error");
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->hide();
  outer->addWidget(error_);

  auto* buttons = new QDialogButtonBox(this);
  start_ = buttons->addButton(tr("Prepare"), QDialogButtonBox::AcceptRole);
  start_->setObjectName("start");
  cancel_ = buttons->addButton(QDialogButtonBox::Cancel);
  cancel_->setObjectName("cancel");
  outer->addWidget(buttons);
  connect(start_, &QPushButton::clicked, this, &PrepareDataDialog::start);
  connect(cancel_, &QPushButton::clicked, this, &PrepareDataDialog::cancel);
  resize(560, sizeHint().height());
}

PrepareDataDialog::~PrepareDataDialog() {
  if (process_ && process_->state() != QProcess::NotRunning) {
    process_->kill();
    process_->waitForFinished(2000);
  }
}

void PrepareDataDialog::set_tokenizer(const QString& path) { tokenizer_->setText(path); }
void PrepareDataDialog::set_inputs(const QStringList& files) {
  inputs_->clear();
  inputs_->addItems(files);
}
void PrepareDataDialog::set_text_field(const QString& field) { text_field_->setText(field); }
void PrepareDataDialog::set_output(const QString& dir) { output_->setText(dir); }
QString PrepareDataDialog::status_text() const { return status_->text(); }
QString PrepareDataDialog::error_text() const { return error_->isHidden() ? QString() : error_->text(); }

QString PrepareDataDialog::default_program() const {
  // The workbench is the meshwork executable itself; a test binary names it with set_program().
  return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("meshwork"));
}

void PrepareDataDialog::set_state(State s) {
  state_ = s;
  const bool running = s == State::running;
  start_->setEnabled(!running);
  for (QWidget* w : {static_cast<QWidget*>(tokenizer_), static_cast<QWidget*>(inputs_),
                     static_cast<QWidget*>(text_field_), static_cast<QWidget*>(output_)})
    w->setEnabled(!running);
  cancel_->setText(running ? tr("Cancel") : tr("Close"));
  Q_EMIT state_changed();
}

void PrepareDataDialog::start() {
  QStringList args = {"data", "prepare", "--progress", "json", "--tokenizer", tokenizer_->text().trimmed(),
                      "--out", output_->text().trimmed(), "--text-field", text_field_->text().trimmed()};
  for (int i = 0; i < inputs_->count(); ++i) args << "--input" << inputs_->item(i)->text();
  error_->hide();
  bar_->setValue(0);
  pending_.clear();
  delete process_;
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::SeparateChannels);
  connect(process_, &QProcess::readyReadStandardOutput, this, &PrepareDataDialog::read_events);
  connect(process_, &QProcess::finished, this, &PrepareDataDialog::finished);
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    error_->setText(tr("cannot run %1: %2").arg(process_->program(), process_->errorString()));
    error_->show();
    set_state(State::failed);
  });
  status_->setText(tr("Starting…"));
  set_state(State::running);
  process_->start(program_.isEmpty() ? default_program() : program_, args);
}

void PrepareDataDialog::cancel() {
  if (state_ != State::running) {
    reject();
    return;
  }
  // SIGTERM: meshwork dies, its tokenizer worker follows on the broken pipe; the manifest is
  // written last, so a cancelled directory is never taken for a prepared one.
  set_state(State::cancelled);
  status_->setText(tr("Cancelled"));
  process_->terminate();
}

void PrepareDataDialog::read_events() {
  pending_ += process_->readAllStandardOutput();
  int nl;
  while ((nl = pending_.indexOf('\n')) >= 0) {
    const QByteArray line = pending_.left(nl);
    pending_.remove(0, nl + 1);
    const QJsonObject e = QJsonDocument::fromJson(line).object();
    const QString event = e.value("event").toString();
    if (event == "progress") {
      const double total = e.value("total").toDouble();
      const double done = e.value("bytes").toDouble();
      const bool hashing = e.value("phase").toString() == "hashing";
      // Hashing (reading every input once) is the first 5% of the bar.
      const double frac = total > 0 ? done / total : 0;
      bar_->setValue(int(1000 * (hashing ? 0.05 * frac : 0.05 + 0.95 * frac)));
      status_->setText((hashing ? tr("Checking inputs: %1 / %2 MB") : tr("Tokenizing: %1 / %2 MB, %3 MB/s, %4 tokens, ETA %5"))
                           .arg(done / 1e6, 0, 'f', 1)
                           .arg(total / 1e6, 0, 'f', 1)
                           .arg(e.value("mb_per_s").toDouble(), 0, 'f', 1)
                           .arg(qint64(e.value("tokens").toDouble()))
                           .arg(eta_text(e.value("eta_s").toDouble())));
    } else if (event == "done") {
      bar_->setValue(bar_->maximum());
      const QString summary = e.value("summary").toString();
      status_->setText((e.value("reused").toBool() ? tr("Reused (same inputs): %1") : tr("Prepared: %1")).arg(summary));
      set_state(State::done);
      Q_EMIT prepared(e.value("out").toString(), summary);
    } else if (event == "error") {
      error_->setText(e.value("message").toString());
      error_->show();
    }
  }
}

void PrepareDataDialog::finished(int code, QProcess::ExitStatus status) {
  read_events();
  if (state_ == State::cancelled || state_ == State::done) return;
  if (code != 0 || status != QProcess::NormalExit) {
    if (error_->isHidden()) {
      QString err = QString::fromUtf8(process_->readAllStandardError()).trimmed();
      if (err.startsWith("meshwork: ")) err = err.mid(10);
      error_->setText(err.isEmpty() ? tr("meshwork data prepare exited with %1").arg(code) : err);
      error_->show();
    }
    status_->setText(tr("Failed"));
    set_state(State::failed);
  }
}

}  // namespace meshwork::ui
