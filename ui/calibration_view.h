// The calibration view (Cluster → Calibration…, View → Calibration…): the cluster calibrations
// the store holds, newest first, in a selector (fingerprint id, date, nodes); the selected one's
// matmul rates and collective fits as tables; and per fit the effective bus bandwidth x / t(x)
// over message sizes 4 KiB to 16 MiB on a log axis (BandwidthChart). A Calibrate button asks the
// Cluster view to measure its nodes again; its progress shows here too. Reads only its model
// (CalibrationModel): the store is the model's business, on the store worker.
#pragma once

#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;
class QTableView;

namespace meshwork::ui {

class BandwidthChart;
class CalibrationModel;

class CalibrationView : public QWidget {
  Q_OBJECT
 public:
  explicit CalibrationView(CalibrationModel* model, QWidget* parent = nullptr);

  QComboBox* selector() const { return selector_; }
  QTableView* matmul_table() const { return matmul_; }
  QTableView* collective_table() const { return collective_; }
  BandwidthChart* chart() const { return chart_; }
  QLabel* details() const { return details_; }
  QPushButton* calibrate_button() const { return calibrate_; }
  QLabel* progress_label() const { return progress_; }

  // The Cluster view's calibration state: `running` disables Calibrate; `line` is the latest
  // progress or the result ("" hides it).
  void set_progress(bool running, const QString& line);
  // Says what Calibrate would measure ("local (2 ranks)"), or why it cannot ("" = enabled).
  void set_calibrate_target(const QString& target, const QString& refusal);
  void apply_theme();

 Q_SIGNALS:
  void calibrate_requested();

 private:
  void rebuild_selector();
  void show_selected();

  CalibrationModel* model_;
  QComboBox* selector_;
  QLabel* details_;
  QLabel* empty_;
  QTableView* matmul_;
  QTableView* collective_;
  BandwidthChart* chart_;
  QPushButton* calibrate_;
  QLabel* progress_;
  QString refusal_;
  bool running_ = false;
};

}  // namespace meshwork::ui
