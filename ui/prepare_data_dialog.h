// "Prepare data…": runs `meshwork data prepare --progress json` as a QProcess (off the GUI thread
// by construction: the GUI only reads its JSON lines as they arrive) with a progress bar, the
// rate and ETA, and Cancel. On success it emits prepared(dir) with the manifest's one-line
// summary; errors are shown in the command's own words (core's field: value: allowed).
#pragma once

#include <QDialog>
#include <QProcess>
#include <QStringList>

class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;

namespace meshwork::ui {

class PrepareDataDialog : public QDialog {
  Q_OBJECT
 public:
  explicit PrepareDataDialog(QWidget* parent = nullptr);
  ~PrepareDataDialog() override;

  // The meshwork executable to run (default: the one running the workbench).
  void set_program(const QString& program) { program_ = program; }
  void set_tokenizer(const QString& path);
  void set_inputs(const QStringList& files);
  void set_text_field(const QString& field);
  void set_output(const QString& dir);

  enum class State { idle, running, done, failed, cancelled };
  State state() const { return state_; }
  QProgressBar* progress_bar() const { return bar_; }
  QPushButton* start_button() const { return start_; }
  QPushButton* cancel_button() const { return cancel_; }
  QString status_text() const;
  QString error_text() const;

 Q_SIGNALS:
  void prepared(const QString& dir, const QString& summary);
  void state_changed();

 private:
  void start();
  void cancel();
  void read_events();
  void finished(int code, QProcess::ExitStatus status);
  void set_state(State s);
  QString default_program() const;

  QString program_;
  QLineEdit* tokenizer_ = nullptr;
  QListWidget* inputs_ = nullptr;
  QLineEdit* text_field_ = nullptr;
  QLineEdit* output_ = nullptr;
  QProgressBar* bar_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* error_ = nullptr;
  QPushButton* start_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QProcess* process_ = nullptr;
  QByteArray pending_;  // a partial line of the process's stdout
  State state_ = State::idle;
};

}  // namespace meshwork::ui
