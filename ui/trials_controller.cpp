#include "ui/trials_controller.h"

#include <QTimer>

#include "core/mesh_json.h"
#include "ui/format.h"
#include "ui/launch_controller.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

namespace {
struct Created {
  store::TrialId id = 0;
  QString error;
};
}  // namespace

TrialsController::TrialsController(QObject* parent) : QObject(parent) {}

void TrialsController::set_launcher(LaunchController* launcher) {
  if (launcher_ == launcher) return;
  if (launcher_) disconnect(launcher_, nullptr, this, nullptr);
  launcher_ = launcher;
  if (!launcher_) return;
  connect(launcher_, &LaunchController::launched, this, &TrialsController::on_launched);
  connect(launcher_, &LaunchController::launch_failed, this,
          [this](const QString& message, const QStringList&) { on_launch_failed(message); });
  connect(launcher_, &LaunchController::finished, this,
          [this](qint64 run, const QString& state, const QString&) { on_finished(run, state); });
}

void TrialsController::set_store(StoreWorker* store) { store_ = store; }

bool TrialsController::start(const RunConfig& base, const std::vector<PlanRow>& rows, int k, int steps) {
  if (running_) {
    Q_EMIT failed(tr("Trials are running already"));
    return false;
  }
  if (!launcher_ || !store_) {
    Q_EMIT failed(tr("No launcher or run store to try shapes with"));
    return false;
  }
  std::vector<PlanRow> chosen;
  for (const PlanRow& r : rows)
    if (r.entry.fits && static_cast<int>(chosen.size()) < k) chosen.push_back(r);
  if (chosen.empty()) {
    Q_EMIT failed(tr("No shape of the plan fits in memory: nothing to try"));
    return false;
  }
  base_ = base;
  base_.training.steps = steps;
  chosen_ = chosen;
  steps_ = steps;
  running_ = true;
  stopping_ = false;
  awaiting_launch_ = false;
  current_run_ = 0;
  next_ = 0;
  trial_ = 0;
  // What was planned, as the workbench showed it, and the run config every trial starts from.
  nlohmann::json planned = nlohmann::json::array();
  for (const PlanRow& r : rows)
    planned.push_back({{"shape", to_json(r.entry.shape)},
                       {"fits", r.entry.fits},
                       {"tokens_per_s", r.entry.time.tokens_per_s},
                       {"step_time_s", r.entry.time.step_s},
                       {"memory_bytes", double(r.entry.memory.total())}});
  const nlohmann::json doc = {{"planned_by", "workbench"}, {"k", k}, {"steps", steps},
                              {"config", to_json(base_)}, {"rows", planned}};
  store_->post<Created>(
      this,
      [doc, chosen](store::RunStore* s) -> Created {
        if (!s) return {0, tr("The run store could not be opened")};
        auto id = store::create_trial(*s, doc);
        if (!id) return {0, QString::fromStdString(id.error().message())};
        for (size_t i = 0; i < chosen.size(); ++i) {
          const PlanRow& r = chosen[i];
          const store::TrialPrediction p{r.entry.shape, r.entry.time.tokens_per_s, r.entry.time.step_s, r.entry.memory.total()};
          if (Status st = store::add_trial_entry(*s, *id, static_cast<int>(i) + 1, p); !st)
            return {0, QString::fromStdString(st.error().message())};
        }
        return {*id, {}};
      },
      [this](Created c) {
        if (c.id == 0) {
          running_ = false;
          Q_EMIT failed(c.error);
          return;
        }
        trial_ = c.id;
        Q_EMIT started(trial_);
        launch_next();
      });
  return true;
}

void TrialsController::stop() {
  if (!running_) return;
  stopping_ = true;
  Q_EMIT progress(tr("Trial %1: stopping").arg(trial_));
  if (current_run_ != 0) launcher_->stop(current_run_);
  // Not launched yet (the group is being stored): done() comes with launch_next().
}

void TrialsController::record(std::function<Status(store::RunStore&)> write) {
  const qint64 trial = trial_;
  store_->post<bool>(
      this, [write](store::RunStore* s) { return s && static_cast<bool>(write(*s)); },
      [this, trial](bool) { Q_EMIT updated(trial); });
}

void TrialsController::launch_next() {
  if (stopping_ || next_ >= count()) {
    done();
    return;
  }
  const PlanRow& row = chosen_[static_cast<size_t>(next_)];
  RunConfig c = base_;
  c.mesh = row.entry.shape;
  c.name = "trial " + std::to_string(trial_) + " #" + std::to_string(next_ + 1) + " " + row.entry.shape.compact();
  Q_EMIT progress(tr("Trial %1 #%2/%3 (%4): launching, %5 steps")
                      .arg(trial_)
                      .arg(next_ + 1)
                      .arg(count())
                      .arg(format_shape(row.entry.shape, QStringLiteral("×")))
                      .arg(steps_));
  awaiting_launch_ = true;
  // A launch that cannot start answers launch_failed at once (on_launch_failed moves on).
  if (!launcher_->launch(c) && awaiting_launch_) on_launch_failed(tr("The launch did not start"));
}

void TrialsController::next_later() {
  ++next_;
  QTimer::singleShot(0, this, &TrialsController::launch_next);
}

void TrialsController::done() {
  running_ = false;
  current_run_ = 0;
  Q_EMIT progress(stopping_ ? tr("Trial %1: stopped").arg(trial_) : tr("Trial %1: every shape tried").arg(trial_));
  Q_EMIT finished(trial_);
}

void TrialsController::on_launched(qint64 run) {
  if (!awaiting_launch_) return;  // someone else's launch
  awaiting_launch_ = false;
  current_run_ = run;
  const store::TrialId trial = trial_;
  const int position = next_ + 1;
  record([trial, position, run](store::RunStore& s) { return store::set_trial_run(s, trial, position, run); });
  Q_EMIT progress(tr("Trial %1 #%2/%3: run %4 started").arg(trial_).arg(position).arg(count()).arg(run));
  if (stopping_) launcher_->stop(run);
}

void TrialsController::on_launch_failed(const QString& message) {
  if (!awaiting_launch_) return;
  awaiting_launch_ = false;
  const store::TrialId trial = trial_;
  const int position = next_ + 1;
  const std::string text = message.toStdString();
  record([trial, position, text](store::RunStore& s) { return store::set_trial_error(s, trial, position, text); });
  Q_EMIT progress(tr("Trial %1 #%2/%3: not launched: %4").arg(trial_).arg(position).arg(count()).arg(message));
  next_later();
}

void TrialsController::on_finished(qint64 run, const QString& state) {
  if (run == 0 || run != current_run_) return;
  current_run_ = 0;
  Q_EMIT progress(tr("Trial %1 #%2/%3: run %4 %5").arg(trial_).arg(next_ + 1).arg(count()).arg(run).arg(state));
  Q_EMIT updated(trial_);
  // Detached: the workbench is closing and the run goes on; launch no more beside it.
  if (state == QStringLiteral("detached")) stopping_ = true;
  next_later();
}

}  // namespace meshwork::ui
