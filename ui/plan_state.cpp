#include "ui/plan_state.h"

#include <QMetaObject>
#include <QThreadPool>
#include <QTimer>
#include "core/handover.h"

namespace meshwork::ui {

PlanState::PlanState(QObject* parent) : QObject(parent) {
  // One worker is enough: estimates are milliseconds, and jobs run in request order.
  pool_.setMaxThreadCount(2);
  config_.name = "untitled";
  // A default run long enough to watch its curves form, short enough to finish while one waits
  // (core's default, 100 steps of the tiny model, is over before the charts have a shape).
  config_.training.steps = 1000;
  config_.mesh = MeshShape{1, -1, 1, 1};  // dp_shard fills the world by default (FSDP)
}

// Workers hold `this`: wait for them; results they posted die with the object.
PlanState::~PlanState() { pool_.waitForDone(); }

std::vector<Diagnostic> PlanState::diagnostics_for(const std::string& field) const {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : diagnostics_)
    if (d.field == field) out.push_back(d);
  return out;
}

bool PlanState::has_errors() const {
  for (const Diagnostic& d : diagnostics_)
    if (is_error(d)) return true;
  return false;
}

void PlanState::set_axis(Axis axis, int size) {
  MeshShape s = config_.mesh;
  // Only one axis may be auto: choosing auto for this axis makes the previous auto axis concrete
  // at the size it had resolved to, so the shape stays what the user sees.
  if (size == -1) {
    for (Axis a : kAxes)
      if (a != axis && s.size(a) == -1) s.set(a, mesh_ ? mesh_->shape().size(a) : 1);
  }
  s.set(axis, size);
  update(config_.mesh, s, false);
}

void PlanState::set_ep(int ep) {
  MeshShape s = config_.mesh;
  s.ep = ep;
  update(config_.mesh, s, false);
}

void PlanState::set_shape(const MeshShape& shape) { update(config_.mesh, shape, false); }

void PlanState::set_model(const nlohmann::json& model) { update(config_.model, model, true); }

void PlanState::set_training(const TrainingConfig& training) { update(config_.training, training, true); }

void PlanState::set_data(const nlohmann::json& data) { update(config_.data, data, false); }

void PlanState::set_cluster(const ClusterFacts& cluster, std::vector<NodeConfig> nodes) {
  cluster_ = cluster;
  config_.nodes = std::move(nodes);
  recompute(true);
}

void PlanState::set_config(const RunConfig& config) {
  const auto nodes = config_.nodes;
  config_ = config;
  if (config_.nodes.empty()) config_.nodes = nodes;
  recompute(true);
}

// The planner ranks every shape of the cluster, so a new shape alone does not re-run it.
template <class T>
void PlanState::update(T& field, const T& value, bool replan) {
  if (field == value) return;
  field = value;
  recompute(replan);
}

void PlanState::recompute(bool replan) {
  revalidate();
  start_estimate();
  if (replan) start_plan();
}

void PlanState::set_name(const std::string& name) { config_.name = name; }

void PlanState::revalidate() {
  diagnostics_ = validate(config_, cluster_);
  mesh_.reset();
  if (auto shape = resolved_shape(config_, cluster_)) {
    if (auto m = DeviceMesh::create(*shape, cluster_.ranks_per_node)) mesh_ = std::move(*m);
  }
  Q_EMIT changed();
}

// Requests are coalesced: many edits in one pass of the event loop (a hostfile adding 64 nodes,
// a loaded config) start one job, after the loop returns.
void PlanState::start_estimate() {
  if (estimate_scheduled_) return;
  estimate_scheduled_ = true;
  ++memory_gen_;  // results of jobs already running are stale from now on
  QTimer::singleShot(0, this, [this] {
    estimate_scheduled_ = false;
    run_estimate();
  });
}

void PlanState::start_plan() {
  if (plan_scheduled_) return;
  plan_scheduled_ = true;
  ++plan_gen_;
  QTimer::singleShot(0, this, [this] {
    plan_scheduled_ = false;
    run_plan();
  });
}

// Runs compute(config, cluster) on the pool; back on the GUI thread, unless a newer request was
// made meanwhile (`generation` moved on), puts its value in `value` or its error in `error` and
// emits `done`.
template <class Compute, class T>
void PlanState::run_job(std::atomic<quint64>& generation, Compute compute, T& value, std::string& error,
                        void (PlanState::*done)()) {
  const quint64 gen = ++generation;
  ++pending_;
  Q_EMIT busy_changed(true);
  pool_.start(handed_over([this, gen, &generation, compute, &value, &error, done, config = config_, cluster = cluster_] {
    if (gen != generation.load()) {  // superseded while queued
      QMetaObject::invokeMethod(this, handed_over([this] { finish_job(); }), Qt::QueuedConnection);
      return;
    }
    auto result = compute(config, cluster);
    QMetaObject::invokeMethod(
        this,
        handed_over([this, gen, &generation, &value, &error, done, result = std::move(result)] {
          finish_job();
          if (gen != generation.load()) return;
          value = {};
          error.clear();
          if (result) value = result.value();
          else error = result.error().message();
          Q_EMIT(this->*done)();
        }),
        Qt::QueuedConnection);
  }));
}

void PlanState::run_estimate() {
  run_job(memory_gen_, [](const RunConfig& c, const ClusterFacts& f) { return estimate_memory(c, f); }, memory_,
          memory_error_, &PlanState::memory_changed);
}

void PlanState::run_plan() {
  run_job(plan_gen_, [](const RunConfig& c, const ClusterFacts& f) { return plan_shapes(c, f); }, plan_,
          plan_error_, &PlanState::plan_changed);
}

void PlanState::finish_job() {
  if (--pending_ == 0) Q_EMIT busy_changed(false);
}

}  // namespace meshwork::ui
