// The configuration being planned and what core says about it. Views edit it through the setters;
// every change re-validates at once (cheap, on the GUI thread) and re-runs the memory estimate and
// the planner on the thread pool. Results come back as queued calls tagged with a generation, so a
// slow, stale answer never overwrites a newer one.
#pragma once

#include <QObject>
#include <QThreadPool>
#include <atomic>
#include <optional>
#include <vector>

#include "core/mesh.h"
#include "core/run_config.h"
#include "ui/core_bridge.h"

namespace meshwork::ui {

class PlanState : public QObject {
  Q_OBJECT
 public:
  explicit PlanState(QObject* parent = nullptr);
  ~PlanState() override;

  const RunConfig& config() const { return config_; }
  const ClusterFacts& cluster() const { return cluster_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  // Diagnostics for one field; "" lists the ones no control owns.
  std::vector<Diagnostic> diagnostics_for(const std::string& field) const;
  bool has_errors() const;
  // The resolved mesh placed on the nodes, when the shape is valid.
  const std::optional<DeviceMesh>& mesh() const { return mesh_; }

  // Latest estimate and plan (empty until the worker answers, or with the reason they failed).
  const std::optional<MemoryEstimate>& memory() const { return memory_; }
  const std::string& memory_error() const { return memory_error_; }
  const std::vector<PlanRow>& plan() const { return plan_; }
  const std::string& plan_error() const { return plan_error_; }
  bool busy() const { return pending_ > 0; }

  void set_axis(Axis axis, int size);  // -1: auto
  void set_ep(int ep);                 // expert parallel (mixture-of-experts models); >= 1
  void set_shape(const MeshShape& shape);
  void set_model(const nlohmann::json& model);
  void set_training(const TrainingConfig& training);
  void set_data(const nlohmann::json& data);  // a path string, or null for the bundled corpus
  void set_cluster(const ClusterFacts& cluster, std::vector<NodeConfig> nodes);
  void set_config(const RunConfig& config);  // e.g. loaded from a file
  void set_name(const std::string& name);

 Q_SIGNALS:
  void changed();          // config, diagnostics or mesh changed
  void memory_changed();   // a new estimate (or its error) arrived
  void plan_changed();     // a new planner table arrived
  void busy_changed(bool busy);

 private:
  // Sets `field` (part of config_) to `value` and, when it changed, recompute(replan).
  template <class T>
  void update(T& field, const T& value, bool replan);
  // Re-validates and re-runs the estimate, and the planner when `replan`.
  void recompute(bool replan);
  void revalidate();
  void start_estimate();
  void start_plan();
  void run_estimate();
  void run_plan();
  template <class Compute, class T>
  void run_job(std::atomic<quint64>& generation, Compute compute, T& value, std::string& error,
               void (PlanState::*done)());
  void finish_job();

  RunConfig config_;
  ClusterFacts cluster_;
  std::vector<Diagnostic> diagnostics_;
  std::optional<DeviceMesh> mesh_;
  std::optional<MemoryEstimate> memory_;
  std::string memory_error_;
  std::vector<PlanRow> plan_;
  std::string plan_error_;
  // Generations: a result is applied only if no newer request was made since it started.
  std::atomic<quint64> memory_gen_{0};
  std::atomic<quint64> plan_gen_{0};
  bool estimate_scheduled_ = false;
  bool plan_scheduled_ = false;
  int pending_ = 0;
  QThreadPool pool_;
};

}  // namespace meshwork::ui
