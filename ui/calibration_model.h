// The cluster calibrations in the run store (core/store/calibration_store.h: `meshwork
// calibrate`, the Cluster view's Calibrate), for the calibration view and the estimates. Loaded
// with list_calibrations() on the store worker (never on the GUI thread), newest first; one is
// selected, and two table models and the bandwidth curves show it:
//   - matmul rates: precision, split, GFLOP/s per rank, ranks per node, threads;
//   - collective fits: link, op, group size n, latency (µs), bandwidth (MB/s), samples, worst
//     residual;
//   - per fit, the effective bus bandwidth x / t(x), t(x) = latency + x / bandwidth, over the
//     bytes x one rank sends, 4 KiB to 16 MiB (the sizes `meshtrain calibrate` measures between).
// for_cluster() answers which stored calibration the workbench's estimates use for a cluster
// (core_bridge's calibration_for_cluster over the loaded list: no store access). run_fits() is
// the fit of the cluster's stored runs on that calibration's base (ui/run_fit_model.h).
#pragma once

#include <QAbstractTableModel>
#include <QObject>
#include <QString>
#include <memory>
#include <optional>
#include <vector>

#include "core/calibration.h"
#include "core/store/calibration_store.h"
#include "ui/run_fit_model.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

// The effective bandwidth of one (link, op, n) fit over message sizes.
struct BandwidthCurve {
  LinkKind link = LinkKind::intra_node;
  Collective op = Collective::all_reduce;
  int group_size = 2;
  QString name;                 // "intra_node all_reduce n=2"
  std::vector<double> bytes;    // x: bytes one rank sends (ring_bytes_sent)
  std::vector<double> bytes_per_s;  // x / t(x)
};

// Display forms shared by the tables, the selector and the tests.
QString format_gflops(double flops_per_s);  // "12.3" (GFLOP/s, one decimal)
QString format_latency_us(double seconds);  // "45.6" (µs, one decimal)
QString format_mb_per_s(double bytes_per_s);  // "1234.5" (MB/s = 1e6 B/s, one decimal)
QString format_residual(double fraction);   // "3 %"
// "3f2a9c1e · 2026-11-25 05:00 UTC · 2 nodes" (the fingerprint id's first 8 hex digits).
QString calibration_label(const store::StoredCalibration& c);

class CalibrationModel : public QObject {
  Q_OBJECT
 public:
  class MatmulTable;
  class CollectiveTable;

  explicit CalibrationModel(StoreWorker* worker, QObject* parent = nullptr);
  ~CalibrationModel() override;

  // Reads the store's calibrations again (on the worker). `select_id`: the stored calibration to
  // select once loaded (a new one); otherwise the selection stays on the same calibration, or the
  // newest when it is gone.
  void refresh(std::optional<int64_t> select_id = std::nullopt);
  const std::vector<store::StoredCalibration>& calibrations() const { return calibrations_; }
  int count() const { return static_cast<int>(calibrations_.size()); }
  QString label(int index) const;
  QString error() const { return error_; }  // the store's error of the last load ("" if none)
  int64_t loads() const { return loads_; }  // completed loads (tests)

  void select(int index);  // -1: none
  int selected_index() const { return selected_; }
  const store::StoredCalibration* selected() const;

  QAbstractTableModel* matmul_table() const;
  QAbstractTableModel* collective_table() const;
  // One curve per collective fit of the selected calibration, in its order.
  const std::vector<BandwidthCurve>& curves() const { return curves_; }
  // The message sizes the curves are drawn at: 4 KiB, 8 KiB, ..., 16 MiB (powers of two).
  static std::vector<double> curve_sizes();
  static BandwidthCurve curve_of(const CollectiveFit& fit);

  // The calibration the estimates use for these nodes (see calibration_for_cluster), or null.
  std::shared_ptr<const Calibration> for_cluster(DeviceKind device, const std::vector<NodeConfig>& nodes) const;
  const store::StoredCalibration* stored_for_cluster(DeviceKind device, const std::vector<NodeConfig>& nodes) const;
  // The time model fitted to the stored runs of the cluster the estimates are for, on the base
  // for_cluster() gives (the workbench tells it the cluster: RunFitModel::set_cluster).
  RunFitModel* run_fits() const { return run_fits_; }

 Q_SIGNALS:
  void loaded();             // every completed load
  void changed();            // a load brought other calibrations than before (estimates redo)
  void selection_changed();  // the tables and curves show another calibration (or none)

 private:
  void apply_selection();

  StoreWorker* worker_;
  OneInFlight load_job_;
  std::optional<int64_t> pending_select_;
  std::vector<store::StoredCalibration> calibrations_;
  std::vector<std::shared_ptr<const Calibration>> shared_;  // one per calibration, for the estimates
  int selected_ = -1;
  QString error_;
  int64_t loads_ = 0;
  MatmulTable* matmul_;
  CollectiveTable* collective_;
  std::vector<BandwidthCurve> curves_;
  RunFitModel* run_fits_;
};

class CalibrationModel::MatmulTable : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kPrecision, kSplit, kGflops, kRanksPerNode, kThreads, kColumns };
  using QAbstractTableModel::QAbstractTableModel;
  void set_rows(std::vector<MatmulRate> rows);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<MatmulRate> rows_;
};

class CalibrationModel::CollectiveTable : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kLink, kOp, kGroupSize, kLatency, kBandwidth, kSamples, kResidual, kColumns };
  using QAbstractTableModel::QAbstractTableModel;
  void set_rows(std::vector<CollectiveFit> rows);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<CollectiveFit> rows_;
};

}  // namespace meshwork::ui
