#include "ui/plan_state.h"

#include <QMetaObject>
#include <QThreadPool>
#include <QTimer>

namespace meshwork::ui {

PlanState::PlanState(QObject* parent) : QObject(parent) {
  // One worker is enough: estimates are milliseconds, and jobs run in request order.
  pool_.setMaxThreadCount(2);
  config_.name = "untitled";
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
  if (s == config_.mesh) return;
  config_.mesh = s;
  revalidate();
  start_estimate();
}

void PlanState::set_shape(const MeshShape& shape) {
  if (shape == config_.mesh) return;
  config_.mesh = shape;
  revalidate();
  start_estimate();
}

void PlanState::set_model(const nlohmann::json& model) {
  if (model == config_.model) return;
  config_.model = model;
  revalidate();
  start_estimate();
  start_plan();
}

void PlanState::set_training(const TrainingConfig& training) {
  if (training == config_.training) return;
  config_.training = training;
  revalidate();
  start_estimate();
  start_plan();
}

void PlanState::set_cluster(const ClusterFacts& cluster, std::vector<NodeConfig> nodes) {
  cluster_ = cluster;
  config_.nodes = std::move(nodes);
  revalidate();
  start_estimate();
  start_plan();
}

void PlanState::set_config(const RunConfig& config) {
  const auto nodes = config_.nodes;
  config_ = config;
  if (config_.nodes.empty()) config_.nodes = nodes;
  revalidate();
  start_estimate();
  start_plan();
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

void PlanState::run_estimate() {
  const quint64 gen = ++memory_gen_;
  ++pending_;
  Q_EMIT busy_changed(true);
  const RunConfig config = config_;
  const ClusterFacts cluster = cluster_;
  pool_.start([this, gen, config, cluster] {
    if (gen != memory_gen_.load()) {  // superseded while queued
      QMetaObject::invokeMethod(this, [this] { finish_job(); }, Qt::QueuedConnection);
      return;
    }
    auto result = estimate_memory(config, cluster);
    QMetaObject::invokeMethod(
        this,
        [self = this, gen, result = std::move(result)] {
          self->finish_job();
          if (gen != self->memory_gen_) return;
          if (result) {
            self->memory_ = result.value();
            self->memory_error_.clear();
          } else {
            self->memory_.reset();
            self->memory_error_ = result.error().message();
          }
          Q_EMIT self->memory_changed();
        },
        Qt::QueuedConnection);
  });
}

void PlanState::run_plan() {
  const quint64 gen = ++plan_gen_;
  ++pending_;
  Q_EMIT busy_changed(true);
  const RunConfig config = config_;
  const ClusterFacts cluster = cluster_;
  pool_.start([this, gen, config, cluster] {
    if (gen != plan_gen_.load()) {
      QMetaObject::invokeMethod(this, [this] { finish_job(); }, Qt::QueuedConnection);
      return;
    }
    auto result = plan_shapes(config, cluster);
    QMetaObject::invokeMethod(
        this,
        [self = this, gen, result = std::move(result)] {
          self->finish_job();
          if (gen != self->plan_gen_) return;
          if (result) {
            self->plan_ = result.value();
            self->plan_error_.clear();
          } else {
            self->plan_.clear();
            self->plan_error_ = result.error().message();
          }
          Q_EMIT self->plan_changed();
        },
        Qt::QueuedConnection);
  });
}

void PlanState::finish_job() {
  if (--pending_ == 0) Q_EMIT busy_changed(false);
}

}  // namespace meshwork::ui
