// A run's page: what it is (name, shape, model, status), its deploy progress while it is being
// launched, its failure's root cause when it failed, a Stop button while it runs, and the live
// charts: loss (smoothed, the raw curve faint behind it), learning rate, grad norm, throughput
// (tokens/s and MFU), memory per rank against capacity, and time per step split into each axis's
// collectives and compute (stacked over steps; per rank at the latest step), for a mixture of
// experts the expert load (ui/expert_load_view.h), and, once the run
// can be judged, the time model's prediction of its step against what it measured ("Predicted
// vs measured": step, compute and each communicating axis; store::predict_run via the model).
//
// The page draws MonitorFrames (monitor_model.h); it never reads the store itself.
#pragma once

#include <QWidget>
#include <map>
#include <memory>

#include "core/store/run_store.h"
#include "ui/health_bar.h"
#include "ui/launch_controller.h"
#include "ui/monitor_model.h"

class QSpinBox;
class QLabel;
class QTableWidget;
class QProgressBar;
class QPushButton;
class QSlider;
class QGridLayout;
class QVBoxLayout;

namespace meshwork::ui {

class BarChart;
class ExpertLoadView;
class MetricChart;
class ResumePanel;
class StoreWorker;
class StragglerTable;

class MonitorPage : public QWidget {
  Q_OBJECT
 public:
  MonitorPage(StoreWorker* worker, QWidget* parent = nullptr);

  void show_run(store::RunId run);  // 0: none
  store::RunId run() const { return model_->run(); }
  MonitorModel* model() const { return model_; }

  // Launch progress (before the run has an id) and follower state, from LaunchController.
  void begin_launch(const QString& name, int nodes);
  void on_launch_step(const QString& text);
  void on_deploy(const DeployUpdate& u);
  // The deploy line of node `node` as shown ("uploading · 45 MiB / 130 MiB · 120 MiB/s · ETA 1 s").
  QString deploy_text(int node) const;
  void on_launch_failed(const QString& message, const QStringList& details);
  void set_following(bool following);

  MetricChart* loss_chart() const { return loss_; }
  MetricChart* lr_chart() const { return lr_; }
  MetricChart* grad_chart() const { return grad_; }
  MetricChart* throughput_chart() const { return tput_; }
  MetricChart* memory_chart() const { return mem_; }
  MetricChart* comm_chart() const { return comm_; }
  BarChart* breakdown_chart() const { return breakdown_; }
  // Mixtures of experts: the experts x steps heat map per sparse layer (hidden for a dense run).
  ExpertLoadView* expert_load_view() const { return expert_; }
  // Where the run hangs or slows (ui/health_bar.h): the banner under the title says it, the
  // button opens the Health view (a window of its own) on the mesh.
  HealthModel* health_model() const { return health_->model(); }
  QLabel* health_banner() const { return health_->banner(); }
  HealthPanel* health_panel() const { return health_->panel(); }
  void show_health() { health_->show_health(); }
  // The rank of the per-rank charts: -1 (shown as "mean over ranks") or any rank of the run.
  QSpinBox* rank_picker() const { return ranks_; }
  StragglerTable* straggler_table() const { return stragglers_; }
  // Predicted vs measured: rows step, compute, then each communicating axis; columns below. The
  // caption says what the prediction was made from; the message (grey) replaces the table when
  // predict_run could not judge the run.
  enum PredictionColumn { kPredWhat, kPredPredicted, kPredMeasured, kPredError, kPredColumns };
  QTableWidget* prediction_table() const { return prediction_table_; }
  QLabel* prediction_caption() const { return prediction_caption_; }
  QLabel* prediction_message() const { return prediction_message_; }
  QPushButton* stop_button() const { return stop_; }
  // "Show sbatch script": shown for a Slurm run; opens a read-only viewer (object name
  // "SbatchScriptViewer", its text edit "SbatchScriptText") with the script as submitted.
  QPushButton* script_button() const { return script_; }
  void show_slurm_script();
  QLabel* failure_label() const { return failure_; }
  // Under the failure: the re-plan for the surviving nodes and "Resume at <shape>" (resume_panel.h).
  ResumePanel* resume_panel() const { return resume_; }
  QLabel* status_label() const { return status_; }
  // Time the last frame took to draw (set_points for every chart + a repaint), for the bench.
  double last_draw_ms() const { return last_draw_ms_; }
  void set_smoothing(double weight);
  void refresh_colors();

 Q_SIGNALS:
  void stop_requested(qint64 run);
  void back_requested();

 protected:
  void resizeEvent(QResizeEvent* e) override;
  bool eventFilter(QObject* watched, QEvent* e) override;

 private:
  void draw(const std::shared_ptr<const MonitorFrame>& f);
  void draw_header(const MonitorFrame& f);
  void draw_prediction(const PredictionPtr& p);
  void rebuild_series(const MonitorFrame& f);
  void zoom_all(std::optional<std::pair<double, double>> range);

  StoreWorker* worker_;
  MonitorModel* model_;
  QLabel* title_;
  QLabel* status_;
  QLabel* facts_;
  QPushButton* stop_;
  QPushButton* script_;
  QString slurm_script_;  // of the run shown, from its last frame
  QPushButton* back_;
  QLabel* failure_;
  ResumePanel* resume_;
  HealthBar* health_;
  QWidget* deploy_box_;
  QLabel* deploy_step_;
  QVBoxLayout* deploy_rows_;
  struct DeployRow {
    QLabel* host;
    QProgressBar* bar;
    QLabel* text;
    double last_bytes = 0;
    qint64 last_ms = 0;
    double speed = 0;  // bytes/s, smoothed
  };
  std::map<int, DeployRow> deploy_;
  QSpinBox* ranks_;
  QSlider* smoothing_;
  QLabel* smoothing_value_;
  MetricChart* loss_;
  MetricChart* lr_;
  MetricChart* grad_;
  MetricChart* tput_;
  MetricChart* mem_;
  MetricChart* comm_;
  BarChart* breakdown_;
  ExpertLoadView* expert_;
  StragglerTable* stragglers_;
  QTableWidget* prediction_table_;
  QLabel* prediction_caption_;
  QLabel* prediction_message_;
  double smoothing_weight_ = 0.6;
  int series_world_ = -1;  // the world / shape the per-rank series were built for
  MeshShape series_shape_{0, 0, 0, 0};
  std::vector<Axis> comm_axes_;  // axes with a layer in the comm chart
  bool comm_ep_ = false;         // and the experts' all-to-all's layer after them
  bool following_ = false;
  double last_draw_ms_ = 0;
};

// Resamples a decimated series onto `x` as a step function (the value of the last point at or
// before each x), so stacked layers share one grid.
std::vector<double> resample(const std::vector<store::Point>& points, const std::vector<double>& x);

}  // namespace meshwork::ui
