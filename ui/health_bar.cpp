#include "ui/health_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

#include "ui/store_worker.h"

namespace meshwork::ui {

HealthBar::HealthBar(StoreWorker* worker, QWidget* parent) : QWidget(parent) {
  model_ = new HealthModel(worker, this);
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 0, 0, 0);
  banner_ = new QLabel(this);
  banner_->setObjectName("HealthBanner");
  banner_->setWordWrap(true);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->setProperty("role", "error");
  button_ = new QPushButton(tr("Show on the mesh…"), this);
  button_->setObjectName("ShowHealth");
  button_->setToolTip(tr("Every rank coloured by what it does, the ranks the others wait for, their stacks, "
                         "and step and wait times per rank and step"));
  row->addWidget(banner_, 1);
  row->addWidget(button_);
  panel_ = std::make_unique<HealthPanel>();
  panel_->setWindowTitle(tr("Run health — Meshwork"));
  panel_->set_db(worker->db_path());
  panel_->resize(1100, 760);
  set_shown(false);
  connect(button_, &QPushButton::clicked, this, &HealthBar::show_health);
  connect(model_, &HealthModel::report_ready, this, &HealthBar::show_report);
}

HealthBar::~HealthBar() = default;

void HealthBar::set_run(store::RunId run) {
  model_->set_run(run);
  if (run == 0) set_shown(false);
}

void HealthBar::show_health() {
  panel_->show();
  panel_->raise();
  panel_->activateWindow();
  model_->refresh();
}

void HealthBar::show_report(const HealthPtr& report) {
  const bool bad = report && !report->error && report->live && report->diagnosis.state != HealthState::healthy;
  if (bad) banner_->setText(QString::fromStdString(report->diagnosis.summary()));
  set_shown(bad);
  panel_->show_report(report);
}

// The banner while something is wrong; the button also while the Health window is open (to
// bring it forward); the row itself only when either shows, so a healthy run's page has no gap.
void HealthBar::set_shown(bool bad) {
  banner_->setVisible(bad);
  const bool button = bad || panel_->isVisible();
  button_->setVisible(button);
  setVisible(bad || button);
}

}  // namespace meshwork::ui
