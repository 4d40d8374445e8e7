// The Cluster mode: add nodes (host, user@host:port, ~/.ssh/config alias, or a hostfile), probe
// them with progress per node, accept unknown host keys by fingerprint, and see each node as a
// card. The local machine is always there first and needs no SSH.
//
// The calibration row (set_calibration): whether a stored calibration of these nodes feeds the
// time estimates; Calibrate runs `meshtrain calibrate` on the cluster's online nodes through the
// launch path (CalibrateController), its progress on the row; Calibration… opens the calibration
// view (CalibrationView over CalibrationModel), which refreshes and shows the new calibration when
// a run ends.
#pragma once

#include <QWidget>
#include <functional>

#include "core/run_config.h"

class QDialog;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QScrollArea;
class QTimer;

namespace meshwork::ui {

class CalibrateController;
class CalibrationModel;
class CalibrationView;
class ClusterModel;
class LaunchController;
class NodeCard;
class NodeGrid;
class NodeProber;
class StoreWorker;

class ClusterPanel : public QWidget {
  Q_OBJECT
 public:
  ClusterPanel(ClusterModel* model, NodeProber* prober, QWidget* parent = nullptr);

  // Adds each host named in `text` (comma or space separated) and probes it; errors in core's
  // words go under the field.
  void add_hosts(const QString& text);
  Q_SLOT void add_hostfile();  // file dialog
  void add_hostfile(const QString& path);
  Q_SLOT void probe_all();
  void probe(const QString& host);
  // Trusts the fingerprint the node's card shows (after the user's yes) and probes again.
  void accept_host_key(const QString& host);
  // The card of `host`, scrolled into view (only cards on screen exist: the grid is virtualized);
  // nullptr when no node has that host.
  NodeCard* card(const QString& host);
  NodeGrid* grid() const { return grid_; }
  QString add_error() const;
  QString summary_text() const;  // the line over the cards: nodes, ranks, memory per rank
  // Another way to give the cluster (the hypothetical cluster): its header on the heading's line,
  // its body under the calibration row.
  void add_section(QWidget* header, QWidget* body);
  // When false, unknown host keys are asked about with a dialog; tests answer directly.
  void set_ask_host_keys(bool ask) { ask_host_keys_ = ask; }

  // Turns on the calibration row: calibrations read from `store` (on its worker), Calibrate
  // launched through `launcher`'s request (its meshtrain, runtime and SSH options), with the
  // model and training settings of `base_config()` (the plan's: meshtrain calibrate multiplies
  // the model's shapes).
  void set_calibration(StoreWorker* store, LaunchController* launcher, std::function<RunConfig()> base_config);
  CalibrationModel* calibrations() const { return calibrations_; }  // null before set_calibration
  CalibrateController* calibrator() const { return calibrator_; }
  // The calibration view in its window (made on first use).
  Q_SLOT void show_calibration();
  CalibrationView* calibration_view() const { return calibration_view_; }
  // The Calibrate action on the cluster's online nodes; false (and the row says why) when it
  // cannot start.
  Q_SLOT bool calibrate();
  QPushButton* calibrate_button() const { return calibrate_button_; }
  QString calibration_status() const;    // "Calibrated: …" / "Not calibrated: …" (the row)
  QString calibration_progress() const;  // the latest progress line or result

 Q_SIGNALS:
  void node_selected(int row);
  void status_message(const QString& text);

 private:
  // Shows `host`'s card as probing at `progress` % with `text`; false when no card has that host.
  bool mark_probing(const QString& host, int progress, const QString& text);
  void update_summary();
  void on_host_key(const QString& host, const QString& fingerprint);
  // The nodes Calibrate would measure (online ones), or why it cannot ("" = it can).
  std::vector<NodeConfig> calibration_nodes(QString* refusal, bool full) const;
  std::vector<NodeConfig> host_slots() const;  // every node's host and ranks, nothing else
  void update_calibration_row();
  void set_calibration_progress(const QString& line);

  ClusterModel* model_;
  NodeProber* prober_;
  QHBoxLayout* heading_row_;
  QLineEdit* host_edit_;
  QLabel* add_error_;
  QLabel* summary_;
  NodeGrid* grid_;
  QTimer* summary_timer_;
  bool ask_host_keys_ = true;

  QWidget* calibration_row_ = nullptr;
  QLabel* calibration_status_ = nullptr;
  QLabel* calibration_progress_ = nullptr;
  QPushButton* calibrate_button_ = nullptr;
  QPushButton* stop_calibration_ = nullptr;
  CalibrationModel* calibrations_ = nullptr;
  CalibrateController* calibrator_ = nullptr;
  StoreWorker* store_ = nullptr;
  LaunchController* launcher_ = nullptr;
  std::function<RunConfig()> base_config_;
  QDialog* calibration_dialog_ = nullptr;
  CalibrationView* calibration_view_ = nullptr;
};

}  // namespace meshwork::ui
