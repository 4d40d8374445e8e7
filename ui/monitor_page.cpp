// Past 600 lines: the page builds, lays out and draws every chart of a run from one frame, and
// splitting the drawing from the charts it fills would only pass the frame around.
#include "ui/monitor_page.h"

#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QTableWidget>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/axis_colors.h"
#include "ui/error_text.h"
#include "ui/bar_chart.h"
#include "ui/expert_load_view.h"
#include "ui/flow_layout.h"
#include "ui/format.h"
#include "ui/metric_chart.h"
#include "ui/panel_widgets.h"
#include "ui/resume_panel.h"
#include "ui/runs_model.h"
#include "ui/store_worker.h"
#include "ui/straggler_table.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
QColor ink() { return metric_color(MetricSeries::ink, is_dark()); }
QColor lr_color() { return metric_color(MetricSeries::lr, is_dark()); }
QColor grad_color() { return metric_color(MetricSeries::grad_norm, is_dark()); }
QColor mfu_color() { return metric_color(MetricSeries::mfu, is_dark()); }
QColor compute_color() { return metric_color(MetricSeries::compute, is_dark()); }
QColor rank_color(int r, int n) { return meshwork::ui::rank_color(r, n, is_dark()); }
QString status_style(const std::string& s) {
  QColor c = s == store::kStatusOk ? ok_color()
             : s == store::kStatusFailed ? error_color()
             : s == store::kStatusStopped ? warning_color()
                                          : QColor("#2f6fd1");
  return QStringLiteral("QLabel { color: white; background: %1; border-radius: 8px; padding: 2px 10px; font-weight: 600; }")
      .arg(c.name());
}
}  // namespace

std::vector<double> resample(const std::vector<store::Point>& points, const std::vector<double>& x) {
  std::vector<double> out(x.size(), 0.0);
  size_t j = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    while (j + 1 < points.size() && points[j + 1].x <= x[k]) ++j;
    if (!points.empty() && points[j].x <= x[k]) out[k] = points[j].y;
  }
  return out;
}

MonitorPage::MonitorPage(StoreWorker* worker, QWidget* parent)
    : QWidget(parent), worker_(worker), model_(new MonitorModel(worker, this)) {
  auto* outer = new_column_layout(this, {12, 10, 12, 10}, 8);

  auto* head = new QHBoxLayout;
  back_ = new QPushButton(tr("← All runs"), this);
  back_->setFlat(true);
  title_ = new QLabel(this);
  title_->setProperty("role", "heading");
  status_ = new QLabel(this);
  facts_ = new QLabel(this);
  facts_->setObjectName("run_facts");
  facts_->setProperty("role", "muted");
  facts_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // long facts clip, never widen
  facts_->setMinimumWidth(80);
  stop_ = new QPushButton(tr("Stop run"), this);
  stop_->setObjectName("StopRun");
  stop_->setToolTip(tr("SIGTERM to every rank on every node, SIGKILL after 5 s"));
  head->addWidget(back_);
  head->addSpacing(6);
  head->addWidget(title_);
  head->addWidget(status_);
  head->addSpacing(10);
  head->addWidget(facts_, 1);
  script_ = new QPushButton(tr("Show sbatch script"), this);
  script_->setObjectName("ShowSbatchScript");
  script_->setToolTip(tr("The job script this run was submitted with (job.sbatch in its run directory)"));
  script_->setVisible(false);
  head->addWidget(script_);
  head->addWidget(stop_);
  outer->addLayout(head);

  failure_ = new QLabel(this);
  failure_->setObjectName("FailureBanner");
  failure_->setWordWrap(true);
  failure_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  failure_->setVisible(false);
  outer->addWidget(failure_);
  resume_ = new ResumePanel(this);
  outer->addWidget(resume_);

  // Health: the diagnosis' banner, the Health window (ui/health_bar.h).
  health_ = new HealthBar(worker, this);
  outer->addWidget(health_);

  deploy_box_ = new QWidget(this);
  auto* dl = new QVBoxLayout(deploy_box_);
  dl->setContentsMargins(0, 0, 0, 0);
  deploy_step_ = new QLabel(deploy_box_);
  dl->addWidget(deploy_step_);
  deploy_rows_ = new QVBoxLayout;
  dl->addLayout(deploy_rows_);
  deploy_box_->setVisible(false);
  outer->addWidget(deploy_box_);

  // Controls wrap like text, so the page never forces the window wider than it is.
  auto* controls = new_control_row(this);
  controls->addWidget(new QLabel(tr("Per-rank charts:"), this));
  // Any rank of the run, typed or stepped (a list of 8,192 would help nobody); -1 is the mean.
  ranks_ = new QSpinBox(this);
  ranks_->setObjectName("RankPicker");
  ranks_->setRange(-1, 0);
  ranks_->setSpecialValueText(tr("mean over ranks"));
  ranks_->setPrefix(tr("rank "));
  ranks_->setKeyboardTracking(false);  // typing "8191" asks for rank 8191, not 8, 81, 819 first
  ranks_->setMinimumWidth(150);
  ranks_->setToolTip(tr("Type a rank number, or step down to -1 for the mean over ranks"));
  controls->addWidget(ranks_);
  controls->addWidget(new QLabel(tr("Loss smoothing:"), this));
  smoothing_ = new QSlider(Qt::Horizontal, this);
  smoothing_->setRange(0, 99);
  smoothing_->setValue(60);
  smoothing_->setFixedWidth(140);
  smoothing_value_ = new QLabel(QStringLiteral("0.60"), this);
  controls->addWidget(smoothing_);
  controls->addWidget(smoothing_value_);
  auto* save = new QPushButton(tr("Save charts as PNG…"), this);
  controls->addWidget(save);
  auto* hint = new QLabel(tr("Drag across a chart to zoom every chart; double-click or right-click to see the whole run"), this);
  hint->setProperty("role", "muted");
  controls->addWidget(hint);
  outer->addWidget(controls->parentWidget());

  loss_ = new MetricChart(tr("Loss"), this);
  lr_ = new MetricChart(tr("Learning rate"), this);
  grad_ = new MetricChart(tr("Gradient norm"), this);
  tput_ = new MetricChart(tr("Throughput"), this);
  mem_ = new MetricChart(tr("Memory per rank"), this);
  comm_ = new MetricChart(tr("Time per step"), this);
  breakdown_ = new BarChart(tr("Latest step, per rank"), BarChart::Kind::stacked_horizontal, this);
  auto* grid = new QGridLayout;
  grid->setSpacing(8);
  grid->addWidget(loss_, 0, 0, 1, 2);
  grid->addWidget(lr_, 0, 2);
  grid->addWidget(grad_, 0, 3);
  grid->addWidget(tput_, 1, 0, 1, 2);
  grid->addWidget(mem_, 1, 2, 1, 2);
  grid->addWidget(comm_, 2, 0, 1, 2);
  grid->addWidget(breakdown_, 2, 2, 1, 2);
  // Mixtures of experts: the routing under the time per step (the all-to-all's cause).
  expert_ = new ExpertLoadView(this);
  expert_->setVisible(false);
  grid->addWidget(expert_, 3, 0, 1, 4);
  for (int c = 0; c < 4; ++c) grid->setColumnStretch(c, 1);
  outer->addLayout(grid, 1);
  stragglers_ = new StragglerTable(this);
  auto* bottom = new QHBoxLayout;
  bottom->setSpacing(8);
  bottom->addWidget(stragglers_, 3);
  // Predicted vs measured: a glance, as compact as the straggler table beside it.
  auto* pred_box = new QWidget(this);
  pred_box->setObjectName("PredictionBox");
  auto* pl = new QVBoxLayout(pred_box);
  pl->setContentsMargins(0, 0, 0, 0);
  pl->setSpacing(2);
  prediction_caption_ = new QLabel(pred_box);
  prediction_caption_->setObjectName("PredictionCaption");
  prediction_caption_->setProperty("role", "muted");
  prediction_caption_->setWordWrap(true);
  prediction_table_ = new QTableWidget(0, kPredColumns, pred_box);
  prediction_table_->setObjectName("PredictionTable");
  prediction_table_->setHorizontalHeaderLabels({tr("Predicted vs measured"), tr("predicted ms"), tr("measured ms"), tr("error")});
  prediction_table_->verticalHeader()->setVisible(false);
  prediction_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  prediction_table_->horizontalHeader()->setStretchLastSection(true);
  prediction_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  prediction_table_->setSelectionMode(QAbstractItemView::NoSelection);
  prediction_table_->setFocusPolicy(Qt::NoFocus);
  prediction_table_->setMaximumHeight(7 * 26 + 28);  // step, compute and four axes
  prediction_table_->setToolTip(tr("The step time the planner's time model predicts for this run's shape (from the "
                                   "calibration of its nodes and a fit of the cluster's other runs, where there are "
                                   "any), against the mean the run measured; error = (predicted - measured) / measured"));
  prediction_message_ = new QLabel(pred_box);
  prediction_message_->setObjectName("PredictionMessage");
  prediction_message_->setWordWrap(true);
  prediction_message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  pl->addWidget(prediction_caption_);
  pl->addWidget(prediction_table_);
  pl->addWidget(prediction_message_);
  pl->addStretch();
  bottom->addWidget(pred_box, 2);
  outer->addLayout(bottom);

  connect(back_, &QPushButton::clicked, this, &MonitorPage::back_requested);
  connect(stop_, &QPushButton::clicked, this, [this] {
    if (run() != 0) Q_EMIT stop_requested(run());
    stop_->setEnabled(false);
    stop_->setText(tr("Stopping…"));
  });
  connect(script_, &QPushButton::clicked, this, &MonitorPage::show_slurm_script);
  connect(ranks_, &QSpinBox::valueChanged, this, [this](int rank) { model_->set_rank(rank); });
  connect(expert_, &ExpertLoadView::layer_chosen, this, [this](int layer) { model_->set_moe_layer(layer); });
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) { set_smoothing(v / 100.0); });
  connect(save, &QPushButton::clicked, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Save the charts into"));
    if (dir.isEmpty()) return;
    const QString p = QStringLiteral("%1/run-%2-").arg(dir).arg(run());
    loss_->save_png(p + "loss.png");
    lr_->save_png(p + "lr.png");
    grad_->save_png(p + "grad-norm.png");
    tput_->save_png(p + "throughput.png");
    mem_->save_png(p + "memory.png");
    comm_->save_png(p + "time-per-step.png");
    breakdown_->save_png(p + "latest-step.png");
  });
  for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) {
    connect(c, &MetricChart::x_range_requested, this, [this](double a, double b) { zoom_all(std::make_pair(a, b)); });
    connect(c, &MetricChart::zoom_reset, this, [this] { zoom_all(std::nullopt); });
  }
  connect(model_, &MonitorModel::frame_ready, this, &MonitorPage::draw);
  connect(model_, &MonitorModel::prediction_ready, this, &MonitorPage::draw_prediction);
  loss_->installEventFilter(this);

  // Lines that do not depend on the run's shape.
  loss_->add_line(tr("raw"), {ink(), 1.0, 0.22, Qt::SolidLine, false, false});
  loss_->add_line(tr("loss"), {ink(), 2.0, 1.0, Qt::SolidLine, true, false});
  // Validation loss (--eval-data): a few points, drawn as its own line with a legend entry once
  // the run has one.
  loss_->add_line(tr("eval loss"), {lr_color(), 2.0, 1.0, Qt::DashLine, false, false});
  lr_->add_line(tr("lr"), {lr_color(), 1.8, 1.0, Qt::SolidLine, false, false});
  grad_->add_line(tr("grad norm"), {grad_color(), 1.4, 1.0, Qt::SolidLine, false, false});
  tput_->add_line(tr("tokens/s (run)"), {ink(), 1.8, 1.0, Qt::SolidLine, true, false});
  tput_->add_line(tr("MFU %"), {mfu_color(), 1.4, 1.0, Qt::DashLine, true, true});
  loss_->set_axis_titles(tr("step"), {});
  lr_->set_axis_titles(tr("step"), {});
  grad_->set_axis_titles(tr("step"), {});
  tput_->set_axis_titles(tr("step"), tr("tokens/s"), tr("MFU %"));
  draw_prediction(nullptr);
  show_run(0);
}

void MonitorPage::set_smoothing(double w) {
  smoothing_weight_ = std::clamp(w, 0.0, 0.99);
  smoothing_value_->setText(QString::number(smoothing_weight_, 'f', 2));
  if (smoothing_->value() != qRound(smoothing_weight_ * 100)) smoothing_->setValue(qRound(smoothing_weight_ * 100));
  if (model_->frame()) draw(model_->frame());
}

void MonitorPage::show_run(store::RunId run) {
  if (run != model_->run()) {
    for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) c->reset_zoom();
    series_world_ = -1;
    failure_->setVisible(false);
    resume_->set_run_status(run, {});
    slurm_script_.clear();
    script_->setVisible(false);
    draw_prediction(nullptr);
  }
  model_->set_pixels(loss_->width());
  model_->set_run(run);
  health_->set_run(run);
  stop_->setText(tr("Stop run"));
  if (run == 0) {
    title_->setText(tr("No run"));
    status_->clear();
    facts_->clear();
    stop_->setEnabled(false);
  }
}

void MonitorPage::begin_launch(const QString& name, int nodes) {
  show_run(0);
  title_->setText(name.isEmpty() ? tr("New run") : name);
  status_->setText(tr("launching"));
  status_->setStyleSheet(status_style("running"));
  facts_->setText(tr("%n node(s)", nullptr, nodes));
  for (auto& [i, row] : deploy_) {
    delete row.host;
    delete row.bar;
    delete row.text;
  }
  deploy_.clear();
  deploy_step_->setText(tr("Connecting…"));
  deploy_box_->setVisible(true);
  failure_->setVisible(false);
}

void MonitorPage::on_launch_step(const QString& text) { deploy_step_->setText(QStringLiteral("<b>%1</b>").arg(text.toHtmlEscaped())); }

void MonitorPage::on_deploy(const DeployUpdate& u) {
  auto it = deploy_.find(u.node);
  if (it == deploy_.end()) {
    DeployRow row;
    auto* line = new QHBoxLayout;
    row.host = new QLabel(u.host, deploy_box_);
    row.host->setMinimumWidth(140);
    row.bar = new QProgressBar(deploy_box_);
    row.bar->setRange(0, 1000);
    row.bar->setTextVisible(false);
    row.bar->setFixedHeight(10);
    row.text = new QLabel(deploy_box_);
    row.text->setMinimumWidth(260);
    line->addWidget(row.host);
    line->addWidget(row.bar, 1);
    line->addWidget(row.text);
    deploy_rows_->addLayout(line);
    it = deploy_.emplace(u.node, row).first;
  }
  DeployRow& r = it->second;
  const qint64 now = QDateTime::currentMSecsSinceEpoch();
  if (u.stage == "uploading" && r.last_ms > 0 && now > r.last_ms && u.bytes_done >= r.last_bytes) {
    const double inst = (u.bytes_done - r.last_bytes) * 1000.0 / static_cast<double>(now - r.last_ms);
    r.speed = r.speed > 0 ? 0.7 * r.speed + 0.3 * inst : inst;
  }
  r.last_bytes = u.bytes_done;
  r.last_ms = now;
  const double frac = u.bytes_total > 0 ? u.bytes_done / u.bytes_total : (u.stage == "done" || u.stage == "skipped" ? 1 : 0);
  r.bar->setValue(static_cast<int>(std::lround(std::clamp(frac, 0.0, 1.0) * 1000)));
  QString text = u.stage;
  if (!u.file.isEmpty()) text += QStringLiteral(" ") + u.file;
  if (u.bytes_total > 0)
    text += QStringLiteral(" · %1 / %2").arg(format_bytes(u.bytes_done), format_bytes(u.bytes_total));
  // The rate remote measured over the whole transfer (the runtime bundle), else our own estimate.
  const double speed = u.rate > 0 ? u.rate : r.speed;
  if (u.stage == "uploading" && speed > 0) text += QStringLiteral(" · %1/s").arg(format_bytes(speed));
  if (u.stage == "uploading" && u.eta_s >= 0) text += tr(" · ETA %1 s").arg(qRound(u.eta_s));
  if (u.stage == "skipped") text += tr(" (already there)");
  if (!u.message.isEmpty()) text += QStringLiteral(" · ") + u.message;
  r.text->setText(text);
  if (u.stage == "failed") r.text->setStyleSheet(QStringLiteral("color: %1").arg(error_color().name()));
}

QString MonitorPage::deploy_text(int node) const {
  auto it = deploy_.find(node);
  return it == deploy_.end() ? QString() : it->second.text->text();
}

void MonitorPage::on_launch_failed(const QString& message, const QStringList& details) {
  deploy_step_->setText(tr("<b>Launch failed</b>"));
  status_->setText(tr("not started"));
  status_->setStyleSheet(status_style("failed"));
  QString html = QStringLiteral("<b>%1</b>").arg(message.toHtmlEscaped());
  for (const QString& d : details)
    if (d != message) html += QStringLiteral("<br>%1").arg(d.toHtmlEscaped());
  failure_->setText(html);
  failure_->setStyleSheet(QStringLiteral("QLabel#FailureBanner { border: 2px solid %1; border-radius: 6px; padding: 8px;"
                                         " background: %2; }")
                              .arg(error_color().name(), card_color().name()));
  failure_->setVisible(true);
}

void MonitorPage::set_following(bool following) { following_ = following; }

void MonitorPage::show_slurm_script() {
  if (slurm_script_.isEmpty()) return;
  // Non-modal and read-only: the script as the store keeps it, byte for byte, selectable to copy.
  auto* dialog = new QDialog(this);
  dialog->setObjectName("SbatchScriptViewer");
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->setWindowTitle(tr("sbatch script of run %1").arg(run()));
  auto* lay = new QVBoxLayout(dialog);
  auto* text = new QPlainTextEdit(dialog);
  text->setObjectName("SbatchScriptText");
  text->setReadOnly(true);
  text->setLineWrapMode(QPlainTextEdit::NoWrap);
  text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  text->setPlainText(slurm_script_);
  lay->addWidget(text);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
  connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
  lay->addWidget(buttons);
  dialog->resize(820, 560);
  dialog->show();
}

void MonitorPage::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  model_->set_pixels(loss_->width());
}

bool MonitorPage::eventFilter(QObject* watched, QEvent* e) {
  // The loss chart is the widest: its width in pixels is the resolution every series asks for.
  if (watched == loss_ && e->type() == QEvent::Resize) model_->set_pixels(loss_->width());
  return QWidget::eventFilter(watched, e);
}

void MonitorPage::zoom_all(std::optional<std::pair<double, double>> range) {
  for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) c->set_zoom(range);
  model_->set_range(range);
}

void MonitorPage::rebuild_series(const MonitorFrame& f) {
  series_world_ = f.world;
  series_shape_ = f.shape;
  mem_->clear_series();
  const int lines = static_cast<int>(f.mem.size());
  for (int r = 0; r < lines; ++r) {
    const QColor c = rank_color(r, lines);
    const QString name = f.world > lines ? tr("max over ranks") : tr("rank %1").arg(r);
    mem_->add_line(name, {c, 1.6, 1.0, Qt::SolidLine, lines <= 8, false});
    mem_->add_line(name + tr(" peak"), {c, 1.2, 0.75, Qt::DashLine, false, false});
  }
  mem_->set_axis_titles(tr("step"), {});
  comm_->clear_series();
  comm_axes_.clear();
  for (Axis a : kAxes) {
    if (f.shape.size(a) <= 1) continue;  // an axis of size 1 never communicates
    comm_axes_.push_back(a);
    comm_->add_area(axis_label(a), axis_color(a, is_dark()));
  }
  comm_ep_ = f.shape.ep > 1;
  if (comm_ep_) comm_->add_area(QString::fromUtf8(kEpName.data(), static_cast<int>(kEpName.size())), expert_color(is_dark()));
  comm_->add_area(tr("compute"), compute_color());
  comm_->set_axis_titles(tr("step"), tr("ms"));
  const QSignalBlocker quiet(ranks_);  // the range follows the run; the choice stays the model's
  ranks_->setRange(-1, std::max(0, f.world - 1));
  ranks_->setValue(model_->rank());
}

void MonitorPage::draw_header(const MonitorFrame& f) {
  const store::RunSummary& s = f.summary;
  title_->setText(QStringLiteral("%1 <span style='color:%2'>#%3</span>")
                      .arg(QString::fromStdString(s.name).toHtmlEscaped(), muted_text_color().name())
                      .arg(s.id));
  status_->setText(QString::fromStdString(s.status));
  status_->setStyleSheet(status_style(s.status));
  QStringList facts;
  facts << QStringLiteral("%1 = %2 ranks").arg(format_shape(s.shape)).arg(s.world)
        << QString::fromStdString(s.model) << tr("step %1").arg(completed_steps(s));
  // "step 100 / 100": steps completed of the config's steps, as Runs and the web view count.
  if (f.config.contains("training") && f.config["training"].contains("steps") && f.config["training"]["steps"].is_number_integer())
    facts.last() += QStringLiteral(" / %1").arg(f.config["training"]["steps"].get<int>());
  if (s.final_loss) facts << tr("loss %1").arg(*s.final_loss, 0, 'f', 4);
  if (const auto tps = run_tokens_per_s(s)) facts << format_tokens_per_s(*tps);
  // A re-planned run: its shapes in order, each change with its step and cause in the tooltip.
  QStringList changes;
  if (f.segments.size() > 1) {
    QStringList shapes;
    for (const store::RunSegment& seg : f.segments) shapes << format_shape(seg.mesh);
    facts << tr("%1 shapes: %2").arg(f.segments.size()).arg(shapes.join(QStringLiteral(" → ")));
    for (size_t i = 1; i < f.segments.size(); ++i)
      changes << tr("step %1: %2 → %3 (%4 ranks): %5")
                     .arg(f.segments[i].from_step)
                     .arg(format_shape(f.segments[i - 1].mesh), format_shape(f.segments[i].mesh))
                     .arg(f.segments[i].world)
                     .arg(QString::fromStdString(f.segments[i].cause));
  }
  facts_->setText(facts.join(QStringLiteral("  ·  ")));
  facts_->setToolTip(changes.join(QLatin1Char('\n')));
  resume_->set_run_status(s.id, s.status);
  slurm_script_ = QString::fromStdString(f.slurm_script);
  script_->setVisible(!slurm_script_.isEmpty());
  const bool live = s.status == store::kStatusRunning || s.status == store::kStatusCreated;
  if (stop_->text() != tr("Stopping…") || !live) {
    stop_->setEnabled(live);
    stop_->setText(tr("Stop run"));
  }
  stop_->setVisible(live || following_);
  if (live) deploy_box_->setVisible(false);
  // The root cause where the eye is: which node, which rank, how it exited, its stderr tail.
  if (const auto cause = store::root_cause(s, f.problems)) {
    QString html = QStringLiteral("<b>%1</b>").arg(cause->failed ? tr("The run failed") : tr("The run was stopped"));
    html += QStringLiteral(": %1").arg(QString::fromStdString(cause->reason).toHtmlEscaped());
    if (!cause->detail.empty())
      html += QStringLiteral("<pre style='margin:6px 0 0 0'>%1</pre>").arg(QString::fromStdString(cause->detail).toHtmlEscaped());
    const QColor c = s.status == store::kStatusFailed ? error_color() : warning_color();
    failure_->setText(html);
    failure_->setStyleSheet(QStringLiteral("QLabel#FailureBanner { border: 2px solid %1; border-radius: 6px;"
                                           " padding: 8px; background: %2; }").arg(c.name(), card_color().name()));
    failure_->setVisible(true);
  } else if (!deploy_box_->isVisible()) {
    failure_->setVisible(false);
  }
}

void MonitorPage::draw_prediction(const PredictionPtr& p) {
  prediction_table_->setRowCount(0);
  if (!p) {  // not asked yet
    prediction_caption_->setText(tr("Predicted vs measured: waiting for the run's steps"));
    prediction_table_->setVisible(false);
    prediction_message_->clear();
    prediction_message_->setVisible(false);
    return;
  }
  if (!p->prediction) {
    // predict_run's own words (grey: not a failure of the run, only nothing to judge yet).
    prediction_caption_->setText(tr("Predicted vs measured"));
    prediction_table_->setVisible(false);
    prediction_message_->setText(p->refusal ? QString::fromStdString(p->refusal->message()) : QString());
    prediction_message_->setStyleSheet(QStringLiteral("color: %1").arg(muted_text_color().name()));
    prediction_message_->setVisible(true);
    return;
  }
  prediction_message_->setVisible(false);
  prediction_caption_->setText(ui::prediction_caption(*p->prediction));
  const std::vector<PredictionRow> rows = prediction_rows(*p->prediction);
  prediction_table_->setRowCount(static_cast<int>(rows.size()));
  auto cell = [&](int row, int col, const QString& text) {
    auto* item = new QTableWidgetItem(text);
    if (col != kPredWhat) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    prediction_table_->setItem(row, col, item);
    return item;
  };
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const PredictionRow& row = rows[static_cast<size_t>(r)];
    QTableWidgetItem* what = cell(r, kPredWhat, row.what);
    if (row.axis) what->setForeground(axis_color(*row.axis, is_dark()));
    if (r == 0) {
      QFont bold = what->font();
      bold.setBold(true);
      what->setFont(bold);
    }
    cell(r, kPredPredicted, format_ms(row.predicted_s));
    cell(r, kPredMeasured, format_ms(row.measured_s));
    cell(r, kPredError, format_error_percent(row.error));
  }
  prediction_table_->setVisible(true);
}

void MonitorPage::draw(const std::shared_ptr<const MonitorFrame>& fp) {
  if (!fp) return;
  const MonitorFrame& f = *fp;
  QElapsedTimer timer;
  timer.start();
  if (f.error) {
    facts_->setText(error_text(*f.error));
    return;
  }
  draw_header(f);
  const bool growing = f.summary.status == store::kStatusRunning || f.summary.status == store::kStatusCreated;
  for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) c->set_growing(growing);
  // Where a re-planned run changed shape: a mark on every chart over steps.
  std::vector<MetricChart::XMark> marks;
  for (size_t i = 1; i < f.segments.size(); ++i)
    marks.push_back({static_cast<double>(f.segments[i].from_step), QStringLiteral("→ %1").arg(format_shape(f.segments[i].mesh)),
                     warning_color()});
  for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) c->set_marks(marks);
  if (series_world_ != f.world || !(series_shape_ == f.shape)) rebuild_series(f);

  loss_->set_points(0, f.loss);
  loss_->set_points(1, smooth(f.loss, smoothing_weight_));
  loss_->set_points(2, f.eval_loss);
  loss_->set_line_in_legend(2, !f.eval_loss.empty());
  // (Worded so it changes with the run's size, not with every frame's count of decimated points.)
  loss_->set_note(f.source_points > static_cast<int64_t>(f.loss.size())
                      ? tr("min/max per pixel of %1 points").arg(format_count(static_cast<double>(f.source_points)))
                      : QString());
  lr_->set_points(0, f.lr);
  grad_->set_points(0, f.grad_norm);
  stragglers_->show_frame(f);
  tput_->set_points(0, f.tokens_per_s);
  tput_->set_points(1, f.mfu, 100.0);
  tput_->set_note(f.rank >= 0 ? tr("MFU of rank %1").arg(f.rank) : tr("MFU: mean over ranks"));

  // Memory in the unit its peak reads best in.
  double peak = 0;
  for (const auto& s : f.mem_peak)
    for (const auto& p : s) peak = std::max(peak, p.y);
  const double mib = 1024.0 * 1024.0, gib = mib * 1024.0;
  const bool use_gib = std::max(peak, f.capacity_bytes.value_or(0) > 0 && f.capacity_bytes.value_or(0) < 4 * peak
                                          ? *f.capacity_bytes : 0.0) >= gib;
  const double unit = use_gib ? gib : mib;
  for (size_t r = 0; r < f.mem.size(); ++r) {
    mem_->set_points(static_cast<int>(2 * r), f.mem[r], 1.0 / unit);
    mem_->set_points(static_cast<int>(2 * r + 1), f.mem_peak[r], 1.0 / unit);
  }
  mem_->set_axis_titles(tr("step"), use_gib ? tr("GiB") : tr("MiB"));
  if (f.capacity_bytes && *f.capacity_bytes < 4 * peak) {
    mem_->set_reference(*f.capacity_bytes / unit, tr("capacity"), error_color());
    mem_->set_note(tr("dashed: peak within the step"));
  } else {
    mem_->set_reference(std::nullopt, {}, {});
    mem_->set_note(f.capacity_bytes && peak > 0
                       ? tr("peak %1 of %2 capacity per rank").arg(peak / *f.capacity_bytes < 0.001 ? QStringLiteral("< 0.1%")
                                                                                           : format_percent(peak / *f.capacity_bytes),
                                                                   format_bytes(*f.capacity_bytes))
                       : tr("dashed: peak within the step"));
  }

  // Time per step: each axis's collectives stacked under compute, on the grid of the step time.
  std::vector<double> x;
  x.reserve(f.step_s.size());
  for (const auto& p : f.step_s) x.push_back(p.x);
  std::vector<std::vector<double>> layers;
  for (Axis a : comm_axes_) {
    layers.push_back(resample(f.comm[a], x));
    for (double& v : layers.back()) v *= 1000.0;
  }
  if (comm_ep_) {
    layers.push_back(resample(f.comm_ep, x));
    for (double& v : layers.back()) v *= 1000.0;
  }
  layers.push_back(resample(f.compute, x));
  for (double& v : layers.back()) v *= 1000.0;
  comm_->set_stack(x, layers);
  expert_->setVisible(!f.moe_layers.empty());  // a dense run has no routing to show
  if (!f.moe_layers.empty()) expert_->set_map(f.moe_layers, f.expert_load);
  comm_->set_note(f.rank >= 0 ? tr("rank %1").arg(f.rank) : tr("mean over ranks"));

  if (!f.last_breakdown.empty()) {
    QStringList cats;
    for (size_t r = 0; r < f.last_breakdown.size(); ++r) cats << tr("rank %1").arg(r);
    std::vector<BarChart::Set> sets;
    for (Axis a : comm_axes_) {
      BarChart::Set s{axis_label(a), axis_color(a, is_dark()), {}};
      for (const auto& b : f.last_breakdown) s.values.push_back(b[static_cast<size_t>(a)] * 1000.0);
      sets.push_back(s);
    }
    BarChart::Set c{tr("compute"), compute_color(), {}};
    for (const auto& b : f.last_breakdown) c.values.push_back(b[kAxisCount] * 1000.0);
    sets.push_back(c);
    breakdown_->set_data(cats, sets, tr("ms at step %1").arg(f.summary.steps));
  }
  for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) c->rescale();
  last_draw_ms_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

void MonitorPage::refresh_colors() {
  for (MetricChart* c : {loss_, lr_, grad_, tput_, mem_, comm_}) c->apply_theme();
  // The lines made once (in the constructor) take the new theme's colours here; the per-rank
  // and per-axis ones are made again below.
  for (int line : {0, 1}) loss_->set_line_color(line, ink());
  loss_->set_line_color(2, lr_color());
  lr_->set_line_color(0, lr_color());
  grad_->set_line_color(0, grad_color());
  tput_->set_line_color(0, ink());
  tput_->set_line_color(1, mfu_color());
  breakdown_->apply_theme();
  expert_->apply_theme();
  series_world_ = -1;  // rebuild the per-rank series in the new theme's colours
  if (model_->frame()) draw(model_->frame());
  draw_prediction(model_->prediction());
}

}  // namespace meshwork::ui
