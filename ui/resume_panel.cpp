#include "ui/resume_panel.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/format.h"
#include "ui/panel_widgets.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
// A column of the side by side: what it is (muted) over the shape, large.
QString column_text(const QString& what, const QString& body) {
  return QStringLiteral("<span style='color:%1'>%2</span><br><b style='font-size:15px'>%3</b>")
      .arg(muted_text_color().name(), what, body);
}
QString shape_text(const QString& what, const MeshShape& shape) {
  return column_text(what, QStringLiteral("%1</b> · %2 ranks<b>").arg(format_shape(shape)).arg(shape.world_size()));
}
}  // namespace

ResumePanel::ResumePanel(QWidget* parent) : QFrame(parent) {
  setObjectName("ResumePanel");
  setStyleSheet(QStringLiteral("QFrame#ResumePanel { border: 1px solid %1; border-radius: 6px; background: %2; }")
                    .arg(border_color().name(), card_color().name()));
  auto* col = new_column_layout(this, {10, 8, 10, 8}, 6);
  title_ = new QLabel(tr("<b>Resume on the surviving nodes</b>"), this);
  col->addWidget(title_);
  lost_ = add_wrapped_label(col, this, QStringLiteral("ResumeLost"));
  auto* shapes = new QHBoxLayout;
  old_ = new QLabel(this);
  old_->setObjectName("ResumeOldShape");
  new_ = new QLabel(this);
  new_->setObjectName("ResumeNewShape");
  auto* arrow = new QLabel(QStringLiteral("→"), this);
  arrow->setStyleSheet(QStringLiteral("font-size: 20px;"));
  shapes->addWidget(old_);
  shapes->addSpacing(12);
  shapes->addWidget(arrow);
  shapes->addSpacing(12);
  shapes->addWidget(new_);
  shapes->addStretch(1);
  button_ = new QPushButton(this);
  button_->setObjectName("ResumeButton");
  shapes->addWidget(button_);
  col->addLayout(shapes);
  plan_ = new QLabel(this);
  plan_->setObjectName("ResumePlanText");
  plan_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  plan_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  plan_->setWordWrap(true);
  col->addWidget(plan_);
  message_ = add_wrapped_label(col, this, QStringLiteral("ResumeMessage"));
  message_->setProperty("role", "error");
  connect(button_, &QPushButton::clicked, this, [this] {
    if (run_ != 0) Q_EMIT resume_requested(run_);
  });
  setVisible(false);
}

void ResumePanel::set_run_status(store::RunId run, const std::string& status) {
  if (run != run_) {
    run_ = run;
    setVisible(false);
  }
  if (status != store::kStatusFailed) {
    // Resumed (running again) or any other state: nothing to offer; a later failure asks again.
    if (status == store::kStatusRunning || status == store::kStatusCreated) asked_ = 0;
    setVisible(false);
    return;
  }
  if (asked_ == run) return;
  asked_ = run;
  Q_EMIT check_requested(run);
}

void ResumePanel::show_offer(const ResumeOffer& offer) {
  if (offer.run != run_) return;
  lost_->setText(offer.lost);
  old_->setText(shape_text(tr("before"), offer.old_shape));
  if (offer.fits) {
    new_->setText(shape_text(tr("re-planned"), offer.new_shape));
    plan_->setText(offer.plan_text);
    plan_->setVisible(true);
    message_->clear();
    message_->setVisible(false);
    button_->setText(tr("Resume at %1").arg(format_shape(offer.new_shape)));
    button_->setToolTip(offer.checkpoint_step > 0
                            ? tr("A new segment of this run from the checkpoint of step %1").arg(offer.checkpoint_step)
                            : tr("A new segment of this run from step 1 (no complete checkpoint)"));
    button_->setEnabled(true);
  } else {
    new_->setText(column_text(tr("re-planned"), tr("nothing fits")));
    plan_->clear();
    plan_->setVisible(false);
    message_->setText(offer.refusal);
    message_->setVisible(true);
    button_->setText(tr("Resume"));
    button_->setToolTip(tr("No shape fits the surviving nodes: nothing to resume at"));
    button_->setEnabled(false);
  }
  setVisible(true);
}

void ResumePanel::show_unavailable(store::RunId run) {
  if (run == run_) setVisible(false);
}

void ResumePanel::set_resuming() {
  button_->setEnabled(false);
  button_->setText(tr("Resuming…"));
}

void ResumePanel::ask_again() {
  if (run_ == 0 || !isVisible()) return;
  asked_ = run_;
  Q_EMIT check_requested(run_);
}

}  // namespace meshwork::ui
