#include "ui/trials_panel.h"

#include <QComboBox>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "ui/format.h"
#include "ui/launch_controller.h"
#include "ui/node_prober.h"
#include "ui/panel_widgets.h"
#include "ui/slurm_panel.h"
#include "ui/store_worker.h"
#include "ui/trials_controller.h"
#include "ui/trials_model.h"

namespace meshwork::ui {

namespace {
using Listed = Result<std::vector<store::TrialSummary>>;
using Loaded = Result<store::Trial>;
Error no_store() { return Error{"store", "", "the run store could not be opened"}; }
}  // namespace

TrialsPanel::TrialsPanel(QWidget* parent)
    : QWidget(parent), controller_(new TrialsController(this)), model_(new TrialsModel(this)) {
  setObjectName("TrialsPanel");
  auto* lay = new_column_layout(this, {0, 0, 0, 0}, 4);
  auto* top = new QHBoxLayout;
  top->setContentsMargins(8, 4, 8, 0);
  auto* label = new QLabel(tr("Trial group"), this);
  label->setProperty("role", "muted");
  top->addWidget(label);
  groups_ = new QComboBox(this);
  groups_->setObjectName("TrialGroups");
  groups_->setMinimumContentsLength(12);  // narrow enough for the Plan page at 1024 px
  groups_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  top->addWidget(groups_);
  top->addStretch(1);
  stop_ = new QPushButton(tr("Stop trials"), this);
  stop_->setObjectName("StopTrials");
  stop_->setToolTip(tr("Stop the running trial's run and try no more shapes"));
  top->addWidget(stop_);
  apply_ = new QPushButton(tr("Apply"), this);
  apply_->setObjectName("ApplyTrial");
  apply_->setToolTip(tr("Make the selected shape the plan's (double-click a row does the same)"));
  top->addWidget(apply_);
  lay->addLayout(top);
  status_ = new QLabel(this);
  status_->setObjectName("TrialsStatus");
  status_->setProperty("role", "muted");
  status_->setContentsMargins(8, 0, 8, 0);
  status_->setWordWrap(true);
  status_->setText(tr("No trials yet: “Try the top K” in the Planner tab launches the best predicted shapes "
                      "for a few steps each and ranks them here by what they measured."));
  lay->addWidget(status_);
  table_ = new QTableView(this);
  table_->setObjectName("TrialsTable");
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(24);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setShowGrid(false);
  static const int kWidths[] = {30, 58, 150, 130, 110, 110, 70, 90, 90, 50};
  for (int c = 0; c < TrialsModel::ColumnCount; ++c) table_->setColumnWidth(c, kWidths[c]);
  lay->addWidget(table_, 1);

  connect(groups_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i >= 0) show_trial(groups_->itemData(i).toLongLong());
  });
  connect(apply_, &QPushButton::clicked, this, [this] {
    const QModelIndexList rows = table_->selectionModel()->selectedRows();
    apply_row(rows.isEmpty() ? 0 : rows.first().row());
  });
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& idx) { apply_row(idx.row()); });
  connect(stop_, &QPushButton::clicked, controller_, &TrialsController::stop);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &TrialsPanel::update_buttons);
  connect(model_, &QAbstractItemModel::modelReset, this, &TrialsPanel::update_buttons);

  connect(controller_, &TrialsController::started, this, [this](qint64 trial) {
    refresh(trial);
    update_buttons();
  });
  connect(controller_, &TrialsController::updated, this, [this](qint64 trial) {
    if (trial == shown_) show_trial(trial);
  });
  connect(controller_, &TrialsController::finished, this, [this](qint64 trial) {
    refresh(trial);
    update_buttons();
  });
  connect(controller_, &TrialsController::progress, this, [this](const QString& t) {
    status_->setText(t);
    Q_EMIT status_message(t);
  });
  connect(controller_, &TrialsController::failed, this, [this](const QString& t) {
    status_->setText(t);
    Q_EMIT status_message(t);
    update_buttons();
  });
  update_buttons();
}

void TrialsPanel::set_store(StoreWorker* store) {
  store_ = store;
  controller_->set_store(store);
}

void TrialsPanel::set_launcher(LaunchController* launcher) {
  launcher_ = launcher;
  controller_->set_launcher(launcher);
}

// The workbench's own when the panel sits in its window (MainWindow owns one StoreWorker and one
// LaunchController), so trials are followed and shown like any launch; else the panel's own.
StoreWorker* TrialsPanel::store() {
  if (!store_) {
    auto* s = window()->findChild<StoreWorker*>();
    set_store(s ? s : new StoreWorker(default_store_path(), this));
  }
  return store_;
}

LaunchController* TrialsPanel::launcher() {
  if (!launcher_) {
    auto* l = window()->findChild<LaunchController*>();
    set_launcher(l ? l : new LaunchController(store()->db_path(), this));
  }
  return launcher_;
}

bool TrialsPanel::try_top(const RunConfig& base, const std::vector<PlanRow>& rows, int k, int steps) {
  // As the Launch action does: the SSH keys reviewed on the node cards; not through Slurm (yet).
  if (auto* slurm = window()->findChild<SlurmPanel*>(); slurm && slurm->enabled_for_launch()) {
    const QString t = tr("Trials run over SSH or on this machine, not through Slurm: turn “Launch on Slurm” off");
    status_->setText(t);
    Q_EMIT status_message(t);
    return false;
  }
  LaunchController* l = launcher();
  if (auto* prober = window()->findChild<NodeProber*>()) l->set_ssh_options(prober->ssh_options());
  store();
  return controller_->start(base, rows, k, steps);
}

void TrialsPanel::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refresh(shown_);  // groups stored meanwhile (by `meshwork plan --try` too) appear
}

void TrialsPanel::refresh(store::TrialId trial) {
  const int generation = ++list_generation_;
  store()->post<Listed>(
      this, [](store::RunStore* s) -> Listed { return s ? store::list_trials(*s) : Listed(no_store()); },
      [this, trial, generation](Listed list) {
        if (generation != list_generation_) return;  // a newer listing is on its way
        if (!list) {
          status_->setText(QString::fromStdString(list.error().message()));
          return;
        }
        const QSignalBlocker block(groups_);
        groups_->clear();
        int current = 0;
        for (const store::TrialSummary& t : *list) {
          const QString when = QDateTime::fromSecsSinceEpoch(static_cast<qint64>(t.created)).toString("yyyy-MM-dd HH:mm");
          groups_->addItem(tr("Trial %1 · %n shape(s) · %2", nullptr, t.shapes).arg(t.id).arg(when),
                           static_cast<qlonglong>(t.id));
          if (t.id == trial) current = groups_->count() - 1;
        }
        if (groups_->count() == 0) {
          model_->set_trial(std::nullopt);
          shown_ = 0;
          return;
        }
        groups_->setCurrentIndex(current);
        show_trial(groups_->itemData(current).toLongLong());
      });
}

void TrialsPanel::show_trial(store::TrialId trial) {
  shown_ = trial;
  store()->post<Loaded>(
      this, [trial](store::RunStore* s) -> Loaded { return s ? store::load_trial(*s, trial) : Loaded(no_store()); },
      [this, trial](Loaded loaded) {
        if (trial != shown_) return;  // another group was chosen meanwhile
        if (!loaded) {
          status_->setText(QString::fromStdString(loaded.error().message()));
          model_->set_trial(std::nullopt);
          return;
        }
        const int selected = table_->selectionModel()->selectedRows().isEmpty()
                                 ? -1
                                 : table_->selectionModel()->selectedRows().first().row();
        model_->set_trial(std::move(*loaded));
        if (selected >= 0 && selected < model_->rowCount()) table_->selectRow(selected);
        if (!controller_->running()) {
          const store::Trial& t = *model_->trial();
          const store::TrialResult* w = t.winner();
          const int steps = t.plan.value("steps", 0);
          status_->setText(w ? tr("Trial %1: %2 shape(s), %3 steps each, ranked by measured tokens/s. Winner: run %4, "
                                  "%5 (the planner's #%6) — select a row and Apply to plan with it.")
                                   .arg(t.id)
                                   .arg(t.results.size())
                                   .arg(steps)
                                   .arg(*w->run)
                                   .arg(format_tokens_per_s(*w->tokens_per_s))
                                   .arg(w->position)
                             : tr("Trial %1: %2 shape(s), %3 steps each: no run ended ok, no winner.")
                                   .arg(t.id)
                                   .arg(t.results.size())
                                   .arg(steps));
        }
      });
}

void TrialsPanel::apply_row(int row) {
  if (row < 0 || row >= model_->rowCount()) return;
  const MeshShape shape = model_->result_at(row).predicted.shape;
  Q_EMIT apply_requested(shape);
  Q_EMIT status_message(tr("Applied %1 from trial %2").arg(QString::fromStdString(shape.compact())).arg(shown_));
}

void TrialsPanel::update_buttons() {
  stop_->setVisible(controller_->running());
  apply_->setEnabled(model_->rowCount() > 0);
}

}  // namespace meshwork::ui
