// The routing a mixture of experts' ep shapes are estimated with: balanced, or as a stored run of
// the same model measured it (core/routing_imbalance.h: the busiest ep rank over the mean, per
// ep, for step time and for memory). `meshwork plan --routing RUN` in the workbench.
//
// For the plan's model (resolved on the worker: a preset or a config.json is a file read) the
// store worker lists the runs whose stored routing matches it
// (store::routing_runs: expert and sparse-layer counts, newest first) and reads the chosen one's
// latest steps (store::measured_routing); never on the GUI thread. The choice: the newest
// matching run (the default: a run of the model is the best guess there is, as the fit takes the
// cluster's runs), one run by id, or balanced. Read again when the store's runs change.
#pragma once

#include <QObject>
#include <QString>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/routing_imbalance.h"
#include "core/store/expert_load.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

class RoutingModel : public QObject {
  Q_OBJECT
 public:
  static constexpr store::RunId kNewest = 0;     // the newest run of the model (the default)
  static constexpr store::RunId kBalanced = -1;  // no measurement: every ep rank gets its share
  static constexpr int kOfferedRuns = 20;        // the newest runs of the model offered

  explicit RoutingModel(StoreWorker* worker, QObject* parent = nullptr);

  // The plan's model as its run config names it (RunConfig::model: preset, config.json path or
  // inline object). Reads again only when it differs from the last one; a dense model, or one
  // that does not resolve, has no routing.
  void set_model(const nlohmann::json& run_model);
  void set_choice(store::RunId choice);  // kNewest, kBalanced or a run id
  store::RunId choice() const { return choice_; }
  // Reads the runs and the chosen routing again (on the worker).
  void refresh();

  bool moe() const { return moe_; }  // the last model read is a mixture of experts
  const std::vector<store::RoutingRun>& runs() const { return runs_; }  // offered, newest first
  // The routing the estimates use (null: balanced) and the run it came from (0 when none).
  std::shared_ptr<const MeasuredRouting> routing() const { return routing_; }
  store::RunId routing_run() const { return routing_run_; }
  QString error() const { return error_; }  // why a chosen run's routing could not be read ("" when it was)
  int64_t loads() const { return loads_; }  // completed reads (tests)

 Q_SIGNALS:
  void changed();  // the offered runs or the routing changed (the estimates redo)
  void loaded();   // every completed read

 private:
  StoreWorker* worker_;
  OneInFlight job_;
  nlohmann::json model_;  // the model asked for (null: none yet)
  store::RunId choice_ = kNewest;
  bool moe_ = false;
  std::vector<store::RoutingRun> runs_;
  std::shared_ptr<const MeasuredRouting> routing_;
  store::RunId routing_run_ = 0;
  nlohmann::json loaded_model_;
  QString error_;
  int64_t loads_ = 0;
};

}  // namespace meshwork::ui
