#include "ui/health_model.h"

#include <chrono>
#include <ctime>

#include "ui/store_worker.h"

namespace meshwork::ui {

namespace {

double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

void rank_states_from(const Diagnosis& d, int world, std::vector<RankHealth>& states, std::vector<QString>& notes) {
  const size_t n = static_cast<size_t>(std::max(0, world));
  // Ranks neither waiting nor blamed are moving (no stall report: their flight record changes).
  const bool hung = d.state == HealthState::hang || d.state == HealthState::mismatch;
  states.assign(n, RankHealth::computing);
  notes.assign(n, hung ? QStringLiteral("moving (no stall reported)") : QStringLiteral("computing"));
  auto at = [&](int rank) -> bool { return rank >= 0 && static_cast<size_t>(rank) < n; };
  for (const WaitingGroup& g : d.waiting) {
    const QString what = QStringLiteral("waiting in %1 %2 #%3")
                             .arg(QString::fromStdString(g.axis), QString::fromStdString(g.op))
                             .arg(g.seq);
    for (int r : g.ranks) {
      if (!at(r)) continue;
      states[static_cast<size_t>(r)] = RankHealth::waiting;
      notes[static_cast<size_t>(r)] = what;
    }
  }
  for (const Straggler& s : d.stragglers) {
    if (!at(s.rank)) continue;
    states[static_cast<size_t>(s.rank)] = RankHealth::slow;
    notes[static_cast<size_t>(s.rank)] = s.slow_in == "not running"
                                             ? QStringLiteral("not running (stopped, descheduled or throttled)")
                                             : QStringLiteral("slow in %1").arg(QString::fromStdString(s.slow_in));
  }
  for (const Culprit& c : d.culprits) {
    if (!at(c.rank)) continue;
    states[static_cast<size_t>(c.rank)] = RankHealth::culprit;
    QString words = c.waited_by.empty() ? QStringLiteral("ended") : QStringLiteral("never entered the collective");
    if (!c.process.empty()) words += QStringLiteral(": ") + QString::fromStdString(c.process);
    if (!c.phase.empty()) words += QStringLiteral(", last in ") + QString::fromStdString(c.phase);
    notes[static_cast<size_t>(c.rank)] = words;
  }
}

HealthPtr load_health(store::RunStore* store, store::RunId run, double now, std::optional<double> hang_after_s) {
  auto out = std::make_shared<HealthReport>();
  out->run = run;
  const auto t0 = std::chrono::steady_clock::now();
  if (!store) {
    out->error = Error{"store", "", "could not be opened"};
    return out;
  }
  Result<store::DiagnosisSource> src = store::diagnosis_source(*store, run, now);
  if (!src) {
    out->error = src.error();
    return out;
  }
  out->status = src->status;
  out->live = src->status == store::kStatusRunning || src->status == store::kStatusCreated;
  if (src->follow_beat) out->follower_age_s = now - *src->follow_beat;
  src->input.hang_after_s = hang_after_s;
  out->shape = src->input.shape;
  out->ranks_per_node = src->input.ranks_per_node;
  const int world = static_cast<int>(out->shape.world_size());
  const int nodes = (world + out->ranks_per_node - 1) / std::max(1, out->ranks_per_node);
  for (int n = 0; n < nodes; ++n) out->node_names << QString();
  for (const RankObservation& r : src->input.ranks) {
    if (r.node >= 0 && r.node < nodes && !r.host.empty()) out->node_names[r.node] = QString::fromStdString(r.host);
  }
  if (out->live) out->diagnosis = diagnose(src->input);
  else out->diagnosis.notes.push_back("the run ended: " + src->status);
  rank_states_from(out->diagnosis, world, out->states, out->notes);
  Result<store::StepHeat> heat = store::step_heat(*store, run);
  if (heat) out->heat = std::move(*heat);
  out->query_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

HealthModel::HealthModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  qRegisterMetaType<std::shared_ptr<const HealthReport>>();
  timer_.setInterval(2000);
  connect(&timer_, &QTimer::timeout, this, &HealthModel::refresh);
}

void HealthModel::set_run(store::RunId run) {
  if (run == run_) return;
  run_ = run;
  ++generation_;
  report_.reset();
  if (run_ == 0) {
    timer_.stop();
    return;
  }
  timer_.start();
  refresh();
}

void HealthModel::set_hang_after(std::optional<double> seconds) {
  hang_after_ = seconds;
  refresh();
}

void HealthModel::set_interval_ms(int ms) { timer_.setInterval(ms); }

void HealthModel::refresh() {
  if (run_ == 0 || in_flight_) return;
  in_flight_ = true;
  const store::RunId run = run_;
  const auto hang_after = hang_after_;
  const quint64 gen = generation_;
  worker_->post<HealthPtr>(
      this, [=](store::RunStore* s) { return load_health(s, run, wall_now(), hang_after); },
      [this, gen](HealthPtr r) {
        in_flight_ = false;
        if (gen != generation_ || !r) return;
        report_ = std::move(r);
        ++loaded_;
        // An ended run does not change: no more asking on the timer (refresh() still works).
        if (!report_->live && !report_->error) timer_.stop();
        Q_EMIT report_ready(report_);
      });
}

}  // namespace meshwork::ui
