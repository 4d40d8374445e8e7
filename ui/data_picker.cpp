#include "ui/data_picker.h"

#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QThreadPool>
#include <QVBoxLayout>

#include <filesystem>

#include "core/data/manifest.h"
#include "ui/panel_widgets.h"
#include "ui/plan_state.h"
#include "ui/prepare_data_dialog.h"
#include "core/handover.h"

namespace meshwork::ui {

namespace {

// What the label says about a data path (runs on the thread pool: it reads the disk).
QString describe(const QString& path) {
  namespace fs = std::filesystem;
  if (path.isEmpty()) return QObject::tr("The bundled corpus (KJV text, byte-level tokens)");
  const fs::path p = path.toStdString();
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / data::kManifestName, ec)) {
      auto m = data::read_manifest(p);
      if (!m) return QString::fromStdString(m.error().message());
      return QString::fromStdString(data::manifest_summary(*m));
    }
    int shards = 0;
    for (const auto& e : fs::directory_iterator(p, ec)) shards += e.path().extension() == ".bin";
    return shards ? QObject::tr("%1 llm.c shard(s), no manifest").arg(shards)
                  : QObject::tr("no .bin shards here: prepare data into it first");
  }
  if (fs::is_regular_file(p, ec)) return QObject::tr("one llm.c shard");
  return QObject::tr("no such file or directory");
}

}  // namespace

DataPicker::DataPicker(PlanState* state, QWidget* parent) : QWidget(parent), state_(state) {
  setObjectName("DataPicker");
  auto* col = new_column_layout(this, {0, 0, 0, 0}, 4);
  auto* row = new QHBoxLayout;
  path_ = new QLineEdit(this);
  path_->setObjectName("data");
  path_->setPlaceholderText(tr("bundled corpus"));
  path_->setToolTip(tr("A directory from meshwork data prepare, or llm.c .bin shards (--data)"));
  row->addWidget(path_, 1);
  auto* choose = new QPushButton(tr("Choose…"), this);
  choose->setObjectName("choose_data");
  row->addWidget(choose);
  col->addLayout(row);
  auto* prepare = new QPushButton(tr("Prepare data…"), this);
  prepare->setObjectName("prepare_data");
  auto* row2 = new QHBoxLayout;
  row2->addWidget(prepare);
  row2->addStretch();
  col->addLayout(row2);
  summary_ = new QLabel(this);
  summary_->setObjectName("data_summary");
  summary_->setProperty("role", "muted");
  summary_->setWordWrap(true);
  col->addWidget(summary_);

  connect(path_, &QLineEdit::editingFinished, this, [this] { apply_path(path_->text().trimmed()); });
  connect(choose, &QPushButton::clicked, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Prepared data directory"), path_->text());
    if (!d.isEmpty()) apply_path(d);
  });
  connect(prepare, &QPushButton::clicked, this, [this] { open_prepare_dialog(); });
  connect(state_, &PlanState::changed, this, &DataPicker::sync_from_state);
  sync_from_state();
}

QString DataPicker::summary() const { return summary_->text(); }

PrepareDataDialog* DataPicker::open_prepare_dialog() {
  if (!dialog_) {
    dialog_ = new PrepareDataDialog(this);
    dialog_->setAttribute(Qt::WA_DeleteOnClose);
    if (!program_.isEmpty()) dialog_->set_program(program_);
    dialog_->set_output(QDir::home().filePath(QStringLiteral("meshwork-data")));
    connect(dialog_, &PrepareDataDialog::prepared, this, [this](const QString& dir, const QString&) { apply_path(dir); });
  }
  dialog_->show();
  dialog_->raise();
  return dialog_;
}

void DataPicker::apply_path(const QString& path) {
  const nlohmann::json value = path.isEmpty() ? nlohmann::json(nullptr) : nlohmann::json(path.toStdString());
  if (state_->config().data == value) {
    show_summary(path);
    return;
  }
  state_->set_data(value);
}

void DataPicker::sync_from_state() {
  const auto& d = state_->config().data;
  const QString path = d.is_string() ? QString::fromStdString(d.get<std::string>()) : QString();
  if (!path_->hasFocus()) path_->setText(path);
  if (!shown_once_ || path != shown_) show_summary(path);
}

void DataPicker::show_summary(const QString& path) {
  shown_ = path;
  shown_once_ = true;
  summary_->setText(tr("Reading…"));
  QPointer<DataPicker> self(this);
  QThreadPool::globalInstance()->start(handed_over([self, path] {
    const QString text = describe(path);
    if (!self) return;
    QMetaObject::invokeMethod(
        self.data(),
        handed_over([self, path, text] {
          if (!self || self->shown_ != path) return;  // a newer path was chosen meanwhile
          self->summary_->setText(text);
          Q_EMIT self->summary_changed();
        }),
        Qt::QueuedConnection);
  }));
}

}  // namespace meshwork::ui
