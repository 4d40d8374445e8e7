// The time model fitted to the workbench cluster's stored runs ("learn from runs";
// core/run_fit.h). For the cluster the workbench has (its node set: the hosts of its nodes,
// "local" being this machine's hostname as runs record it, the ranks per node and the device)
// the store's finished runs of that node set are read with store::load_observations() and fitted
// with fit_runs_out_of_sample() (judged on runs it did not learn from) on the store worker (never on the GUI thread), on the same base the estimates
// use: the calibration chosen for the cluster (CalibrationModel::for_cluster), or core's defaults.
// Refitted when the store's runs change (StoreWorker::runs_changed) or the cluster or its
// calibration does (set_cluster). fit_for() hands the fit to the estimates and the planner only
// when it was made for exactly that node set and base, so a fit never mixes with another base.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/run_config.h"
#include "core/run_fit.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

class RunFitModel : public QObject {
  Q_OBJECT
 public:
  explicit RunFitModel(StoreWorker* worker, QObject* parent = nullptr);
  ~RunFitModel() override;

  // The cluster the estimates are for and the calibration they use (null: defaults). Refits
  // when the node set or the calibration differs from the last one asked for.
  void set_cluster(DeviceKind device, const std::vector<NodeConfig>& nodes,
                   std::shared_ptr<const Calibration> calibration);
  // Fits again (on the worker) for the current cluster.
  void refresh();

  // The fit of these nodes' runs on `calibration`'s base, when the last completed fit was made
  // for exactly them; null otherwise (no runs of these nodes, not fitted yet, another base).
  std::shared_ptr<const RunFit> fit_for(DeviceKind device, const std::vector<NodeConfig>& nodes,
                                        const std::shared_ptr<const Calibration>& calibration) const;
  std::shared_ptr<const RunFit> fit() const { return fit_; }  // the last completed fit (or null)
  // Why these nodes' stored runs were not fitted (core's fit_runs_out_of_sample: too few runs to
  // judge a fit on runs it did not learn from), when the last completed fit was for them; "".
  std::string refusal_for(DeviceKind device, const std::vector<NodeConfig>& nodes,
                          const std::shared_ptr<const Calibration>& calibration) const;
  QString refusal() const { return QString::fromStdString(refusal_); }
  QString node_set_id() const { return QString::fromStdString(node_set_); }  // of the cluster asked for
  QStringList skipped() const { return skipped_; }  // "run 12: why" for runs of the cluster left out
  QString error() const { return error_; }          // why there is no fit ("" when fitted or no runs)
  int64_t loads() const { return loads_; }          // completed fits (tests)

  // "" when there is no calibration; else the identity of its base (fingerprint id and date).
  static std::string base_key(const Calibration* calibration);

 Q_SIGNALS:
  void changed();  // a fit completed that differs from the one before (the estimates redo)
  void loaded();   // every completed fit

 private:
  StoreWorker* worker_;
  OneInFlight job_;
  // What was asked for.
  std::string node_set_;
  std::string base_;
  std::shared_ptr<const Calibration> calibration_;
  bool has_cluster_ = false;
  // What the last completed fit was made for, and the fit.
  std::string fit_node_set_;
  std::string fit_base_;
  std::shared_ptr<const RunFit> fit_;
  std::string fit_json_;  // to tell a new fit from the same one again
  QStringList skipped_;
  QString error_;
  std::string refusal_;
  int64_t loads_ = 0;
};

}  // namespace meshwork::ui
