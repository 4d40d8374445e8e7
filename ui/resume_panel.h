// One-click resume on the run page: for a failed run that lost a node, the failure, the shape the
// re-plan chose for the surviving nodes next to the old one (the re-plan `meshwork resume
// --dry-run` prints, from LaunchController::plan_resume) and "Resume at <shape>", which resumes
// from the last complete checkpoint (LaunchController::resume). When nothing fits: the re-plan's
// words, naming what would, and the button disabled.
#pragma once

#include <QFrame>

#include "core/store/run_store.h"
#include "ui/launch_controller.h"

class QLabel;
class QPushButton;

namespace meshwork::ui {

class ResumePanel : public QFrame {
  Q_OBJECT
 public:
  explicit ResumePanel(QWidget* parent = nullptr);

  // The run shown and its status: a failed run is asked about once (check_requested); any other
  // run or status hides the panel.
  void set_run_status(store::RunId run, const std::string& status);
  void show_offer(const ResumeOffer& offer);  // ignored unless it is the run shown
  void show_unavailable(store::RunId run);    // no node lost, not an SSH run: nothing to offer
  void set_resuming();                        // the button was taken: resuming…
  void ask_again();  // the resume's launch failed (shown above): the re-plan is asked for again

  QLabel* lost_label() const { return lost_; }
  QLabel* old_shape_label() const { return old_; }
  QLabel* new_shape_label() const { return new_; }
  QLabel* plan_text() const { return plan_; }
  QLabel* message_label() const { return message_; }
  QPushButton* resume_button() const { return button_; }

 Q_SIGNALS:
  void check_requested(qint64 run);
  void resume_requested(qint64 run);

 private:
  store::RunId run_ = 0;
  store::RunId asked_ = 0;  // the failed run plan_resume was asked about
  QLabel* title_;
  QLabel* lost_;
  QLabel* old_;
  QLabel* new_;
  QLabel* plan_;
  QLabel* message_;
  QPushButton* button_;
};

}  // namespace meshwork::ui
