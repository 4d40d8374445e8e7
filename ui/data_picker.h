// The run config's "data" field in the plan editor: the bundled corpus (default), a prepared
// directory (its manifest's summary: tokens, documents, tokenizer) or any llm.c shard path, and
// "Prepare data…" (PrepareDataDialog) whose result becomes the run's data. The manifest is read
// on the thread pool and handed back queued: the GUI thread never waits on the disk.
#pragma once

#include <QPointer>
#include <QWidget>

class QLabel;
class QLineEdit;
class QPushButton;

namespace meshwork::ui {

class PlanState;
class PrepareDataDialog;

class DataPicker : public QWidget {
  Q_OBJECT
 public:
  explicit DataPicker(PlanState* state, QWidget* parent = nullptr);

  QLineEdit* path_edit() const { return path_; }
  QString summary() const;  // what the label under the path says
  // Opens the dialog (non-modal; also what the button does). Returns it for tests.
  PrepareDataDialog* open_prepare_dialog();
  // The meshwork executable the dialog runs (tests; default: the workbench's own).
  void set_program(const QString& program) { program_ = program; }

 Q_SIGNALS:
  void summary_changed();

 private:
  void sync_from_state();
  void apply_path(const QString& path);
  void show_summary(const QString& path);

  PlanState* state_;
  QLineEdit* path_ = nullptr;
  QLabel* summary_ = nullptr;
  QString program_;
  QString shown_;  // the path whose summary is shown (or being read)
  bool shown_once_ = false;
  QPointer<PrepareDataDialog> dialog_;
};

}  // namespace meshwork::ui
