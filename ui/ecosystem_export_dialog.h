// Export the planned shape for Accelerate, Axolotl or torchtitan (core/interop): the file as it
// will be written, each node's launch line, and, where the tool would refuse the shape, the
// reason in core's words instead of a file.
#pragma once

#include <QDialog>

#include <optional>

#include "core/interop/ecosystem_config.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace meshwork::ui {

class EcosystemExportDialog : public QDialog {
  Q_OBJECT
 public:
  // `request` carries the run config (shape resolved) and the machines it runs on.
  EcosystemExportDialog(interop::ExportRequest request, QWidget* parent = nullptr);

  void set_format(interop::ConfigFormat format);
  interop::ConfigFormat format() const;
  QString preview_text() const;      // the file, or empty when the tool refuses the shape
  QString message_text() const;      // notes and launch lines, or the refusal
  bool can_save() const;
  // Writes preview_text(); the launch lines then name `path`. Errors go to the message line.
  bool save_to(const QString& path);

 private:
  void refresh();

  interop::ExportRequest request_;
  QComboBox* format_;
  QPlainTextEdit* preview_;
  QLabel* message_;
  QPushButton* save_;
  std::optional<interop::ConfigFormat> saved_format_;  // the format last saved, and where
  QString saved_path_;
};

}  // namespace meshwork::ui
