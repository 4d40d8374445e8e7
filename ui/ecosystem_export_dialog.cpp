#include "ui/ecosystem_export_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QVBoxLayout>

#include "ui/error_text.h"

namespace meshwork::ui {

EcosystemExportDialog::EcosystemExportDialog(interop::ExportRequest request, QWidget* parent)
    : QDialog(parent), request_(std::move(request)) {
  setWindowTitle(tr("Export for another tool"));
  format_ = new QComboBox(this);
  format_->setObjectName("ExportFormat");
  format_->addItem(tr("Accelerate config (YAML)"), int(interop::ConfigFormat::accelerate));
  format_->addItem(tr("Axolotl config fragment (YAML)"), int(interop::ConfigFormat::axolotl));
  format_->addItem(tr("torchtitan job config (TOML)"), int(interop::ConfigFormat::torchtitan));
  preview_ = new QPlainTextEdit(this);
  preview_->setObjectName("ExportPreview");
  preview_->setReadOnly(true);
  preview_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  message_ = new QLabel(this);
  message_->setObjectName("ExportMessage");
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  save_ = buttons->addButton(tr("Save…"), QDialogButtonBox::AcceptRole);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(save_, &QPushButton::clicked, this, [this] {
    const QString name = QString::fromStdString(std::string(interop::default_file_name(format())));
    const QString path = QFileDialog::getSaveFileName(this, tr("Save the config"), name);
    // The dialog stays open: the launch lines now name the saved file, ready to copy.
    if (!path.isEmpty()) save_to(path);
  });
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Format:"), this));
  top->addWidget(format_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(preview_, 1);
  layout->addWidget(message_);
  layout->addWidget(buttons);
  connect(format_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
  resize(720, 560);
  refresh();
}

void EcosystemExportDialog::set_format(interop::ConfigFormat format) {
  format_->setCurrentIndex(format_->findData(int(format)));
}

interop::ConfigFormat EcosystemExportDialog::format() const {
  return static_cast<interop::ConfigFormat>(format_->currentData().toInt());
}

QString EcosystemExportDialog::preview_text() const { return preview_->toPlainText(); }
QString EcosystemExportDialog::message_text() const { return message_->text(); }
bool EcosystemExportDialog::can_save() const { return save_->isEnabled(); }

void EcosystemExportDialog::refresh() {
  // The launch lines name the file saved in this format; another format has not been saved yet.
  request_.config_file = saved_format_ == format() ? saved_path_.toStdString() : std::string();
  auto exported = interop::export_config(request_, format());
  if (!exported.ok()) {
    preview_->clear();
    message_->setText(error_text(exported.error()));
    message_->setProperty("error", true);
    save_->setEnabled(false);
    return;
  }
  preview_->setPlainText(QString::fromStdString(exported->text));
  QString text;
  if (saved_format_ == format()) text += tr("Saved %1.\n").arg(saved_path_);
  for (const std::string& n : exported->notes) text += tr("Note: %1\n").arg(QString::fromStdString(n));
  text += tr("Launch, one line per node:");
  for (const std::string& l : exported->launch_commands) text += "\n  " + QString::fromStdString(l);
  message_->setText(text);
  message_->setProperty("error", false);
  save_->setEnabled(true);
}

bool EcosystemExportDialog::save_to(const QString& path) {
  if (!can_save()) return false;
  QSaveFile file(path);  // written whole or not at all
  const QByteArray bytes = preview_text().toUtf8();
  if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit()) {
    message_->setText(tr("%1: cannot be written: %2").arg(path, file.errorString()));
    return false;
  }
  saved_format_ = format();
  saved_path_ = path;
  refresh();
  return true;
}

}  // namespace meshwork::ui
