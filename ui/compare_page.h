// Compare mode: pick 2-10 runs; one metric overlaid (x = step, tokens or wall time; smoothing,
// the raw curves faint behind), each run's mesh shape drawn small, per-axis communication time as
// grouped bars with, beneath them, each run's predicted vs measured step time, compute and
// per-axis communication (store::predict_run, via the model), and the config diff ("only
// differences" on by default). Every chart exports as PNG.
#pragma once

#include <QWidget>
#include <memory>
#include <vector>

#include "core/store/run_store.h"
#include "ui/compare_model.h"

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QListWidget;
class QSlider;
class QTableWidget;

namespace meshwork::ui {

class WrappedLabel;

class BarChart;
class MetricChart;
class RunsModel;
class StoreWorker;

class ComparePage : public QWidget {
  Q_OBJECT
 public:
  ComparePage(StoreWorker* worker, RunsModel* runs, QWidget* parent = nullptr);

  void set_runs(const std::vector<store::RunId>& ids);  // checks them in the picker and loads
  std::vector<store::RunId> runs() const { return checked_; }
  void set_metric(const QString& key);
  void set_x_axis(store::XAxis x);
  void set_smoothing(double weight);
  void set_only_differences(bool on);

  CompareModel* model() const { return model_; }
  MetricChart* chart() const { return chart_; }
  BarChart* comm_chart() const { return comm_; }
  QTableWidget* diff_table() const { return diff_; }
  // Predicted vs measured, one row per compared run: run, step predicted / measured / error,
  // compute predicted / measured, each communicating axis predicted / measured (headers "<axis>
  // pred ms", "<axis> meas ms"), the basis. A run predict_run refuses shows its words instead.
  QTableWidget* prediction_table() const { return prediction_; }
  // The column whose header is `header` ("step pred ms", "tp meas ms", ...); -1 when none.
  int prediction_column(const QString& header) const;
  int series_count() const;  // runs drawn in the overlay
  // Time from set_runs() (or a query change) to the drawn frame, for the bench.
  double last_open_ms() const { return last_open_ms_; }
  bool export_chart_png(const QString& path);  // the overlay
  void refresh_colors();

 Q_SIGNALS:
  void status_message(const QString& text);

 private:
  void reload();
  void draw(const std::shared_ptr<const CompareFrame>& f);
  void fill_picker();
  void fill_diff();
  void fill_prediction();

  StoreWorker* worker_;
  RunsModel* runs_model_;
  CompareModel* model_;
  QListWidget* picker_;
  QComboBox* metric_;
  QComboBox* x_axis_;
  QComboBox* ranks_;
  QSlider* smoothing_;
  QCheckBox* only_diff_;
  QLabel* hint_;
  WrappedLabel* comm_note_;  // how the bars' means were made
  MetricChart* chart_;
  BarChart* comm_;
  QHBoxLayout* thumbs_;
  QTableWidget* diff_;
  QTableWidget* prediction_;
  std::vector<store::RunId> checked_;
  double smoothing_weight_ = 0.6;
  qint64 open_started_ns_ = 0;
  double last_open_ms_ = 0;
  bool filling_ = false;
};

}  // namespace meshwork::ui
