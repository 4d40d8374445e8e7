#include "ui/compare_page.h"

#include "ui/error_text.h"
#include "ui/format.h"

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QScrollArea>
#include <QSlider>
#include <QSplitter>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

#include "core/metrics.h"
#include "ui/axis_colors.h"
#include "ui/bar_chart.h"
#include "ui/flow_layout.h"
#include "ui/mesh_thumb.h"
#include "ui/metric_chart.h"
#include "ui/runs_model.h"
#include "ui/store_worker.h"
#include "ui/core_bridge.h"
#include "ui/panel_widgets.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
qint64 now_ns() {
  static QElapsedTimer t = [] {
    QElapsedTimer e;
    e.start();
    return e;
  }();
  return t.nsecsElapsed();
}
// A run's name as every part of the page shows it.
QString run_label(const store::RunSummary& s) { return QStringLiteral("%1 #%2").arg(QString::fromStdString(s.name)).arg(s.id); }

// Widest a run's column in the config diff and the prediction table gets: a few runs side by side
// at 1024 px. A longer name is shortened in its middle (its "#id" stays) and whole in the tooltip.
constexpr int kRunColumnMaxWidth = 170;

// Draws each picker row within the list's visible width, shortened in the middle, so that a long
// run name keeps its "#id" rather than running off the list's edge (the row's tooltip has it whole).
class ElidedRowDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QStyleOptionViewItem o = option;
    if (const auto* view = qobject_cast<const QAbstractItemView*>(o.widget))
      o.rect.setRight(std::min(o.rect.right(), view->viewport()->rect().right()));
    o.textElideMode = Qt::ElideMiddle;
    QStyledItemDelegate::paint(painter, o, index);
  }
};

void cap_run_columns(QTableWidget* table, int first_run_column) {
  table->resizeColumnsToContents();
  for (int c = first_run_column; c < table->columnCount(); ++c)
    table->setColumnWidth(c, std::min(table->columnWidth(c), kRunColumnMaxWidth));
}
}  // namespace

ComparePage::ComparePage(StoreWorker* worker, RunsModel* runs, QWidget* parent)
    : QWidget(parent), worker_(worker), runs_model_(runs), model_(new CompareModel(worker, this)) {
  auto* outer = new QHBoxLayout(this);
  outer->setContentsMargins(12, 10, 12, 10);
  auto* split = new QSplitter(Qt::Horizontal, this);
  outer->addWidget(split);

  auto* left = new QWidget(split);
  auto* ll = new QVBoxLayout(left);
  ll->setContentsMargins(0, 0, 6, 0);
  auto* pick_title = new QLabel(tr("<b>Runs</b> (2–10)"), left);
  picker_ = new QListWidget(left);
  picker_->setObjectName("ComparePicker");
  // Rows as wide as the list: long names shortened in the middle, whole in their tooltips.
  picker_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  picker_->setTextElideMode(Qt::ElideMiddle);
  picker_->setItemDelegate(new ElidedRowDelegate(picker_));
  ll->addWidget(pick_title);
  ll->addWidget(picker_, 1);
  split->addWidget(left);

  auto* right = new QWidget(split);
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(6, 0, 0, 0);
  auto* controls = new_control_row(right);
  metric_ = new QComboBox(right);
  for (const std::string& k : step_series_keys()) metric_->addItem(QString::fromStdString(k), QString::fromStdString(k));
  // Validation loss of runs with --eval-data (eval records, docs/metrics.md).
  metric_->addItem(QString::fromLatin1(kEvalLossKey), QString::fromLatin1(kEvalLossKey));
  x_axis_ = new QComboBox(right);
  x_axis_->addItem(tr("step"), static_cast<int>(store::XAxis::step));
  x_axis_->addItem(tr("tokens"), static_cast<int>(store::XAxis::tokens));
  x_axis_->addItem(tr("wall time"), static_cast<int>(store::XAxis::time));
  ranks_ = new QComboBox(right);
  ranks_->addItem(tr("mean over ranks"), static_cast<int>(store::Aggregate::mean));
  ranks_->addItem(tr("max over ranks"), static_cast<int>(store::Aggregate::max));
  ranks_->addItem(tr("rank 0"), static_cast<int>(store::Aggregate::none));
  smoothing_ = new QSlider(Qt::Horizontal, right);
  smoothing_->setRange(0, 99);
  smoothing_->setValue(60);
  smoothing_->setFixedWidth(120);
  auto* save = new QPushButton(tr("Export chart PNG…"), right);
  auto* save_bars = new QPushButton(tr("Export bars PNG…"), right);
  controls->addWidget(new QLabel(tr("Metric"), right));
  controls->addWidget(metric_);
  controls->addWidget(new QLabel(tr("x"), right));
  controls->addWidget(x_axis_);
  controls->addWidget(ranks_);
  controls->addWidget(new QLabel(tr("Smoothing"), right));
  controls->addWidget(smoothing_);
  controls->addWidget(save);
  controls->addWidget(save_bars);
  rl->addWidget(controls->parentWidget());
  hint_ = new QLabel(tr("Tick 2–10 runs on the left, or select them in Runs and press Compare."), right);
  hint_->setProperty("role", "muted");
  rl->addWidget(hint_);

  auto* vsplit = new QSplitter(Qt::Vertical, right);
  chart_ = new MetricChart(tr("loss"), vsplit);
  vsplit->addWidget(chart_);
  auto* lower = new QWidget(vsplit);
  auto* lowl = new QHBoxLayout(lower);
  lowl->setContentsMargins(0, 0, 0, 0);
  auto* comm_box = new QWidget(lower);
  auto* cl = new QVBoxLayout(comm_box);
  cl->setContentsMargins(0, 0, 0, 0);
  cl->setSpacing(4);
  // A short title: the column is narrow beside the thumbnails and the config diff.
  comm_ = new BarChart(tr("Comm per step, by axis"), BarChart::Kind::grouped, comm_box);
  cl->addWidget(comm_, 1);
  // How the means were made, in words under the chart: as the value axis' title it was cut.
  comm_note_ = new WrappedLabel(comm_box);
  comm_note_->setObjectName("CompareCommNote");
  comm_note_->setProperty("role", "muted");
  cl->addWidget(comm_note_);
  // Beneath the bars: what the time model predicted for each run against what it measured.
  prediction_ = new QTableWidget(comm_box);
  prediction_->setObjectName("ComparePrediction");
  prediction_->verticalHeader()->hide();
  prediction_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  prediction_->setSelectionMode(QAbstractItemView::NoSelection);
  prediction_->setShowGrid(false);
  prediction_->setAlternatingRowColors(true);
  prediction_->setMaximumHeight(5 * 26 + 28);
  prediction_->setTextElideMode(Qt::ElideMiddle);
  prediction_->setToolTip(tr("Predicted vs measured mean per step, in ms: what the planner's time model predicts for "
                             "each run's shape (its nodes' calibration and a fit of the cluster's other runs), "
                             "against what the run measured; error = (predicted - measured) / measured"));
  cl->addWidget(prediction_);
  lowl->addWidget(comm_box, 2);
  auto* diff_box = new QWidget(lower);
  auto* dl = new QVBoxLayout(diff_box);
  dl->setContentsMargins(0, 0, 0, 0);
  auto* thumbs_box = new QWidget(diff_box);
  thumbs_ = new QHBoxLayout(thumbs_box);
  thumbs_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(diff_box);
  scroll->setWidget(thumbs_box);
  scroll->setWidgetResizable(true);
  scroll->setFixedHeight(150);
  scroll->setFrameShape(QFrame::NoFrame);
  dl->addWidget(scroll);
  auto* diff_head = new QHBoxLayout;
  diff_head->addWidget(new QLabel(tr("<b>Configuration</b>"), diff_box));
  only_diff_ = new QCheckBox(tr("only differences"), diff_box);
  only_diff_->setChecked(true);
  diff_head->addStretch();
  diff_head->addWidget(only_diff_);
  dl->addLayout(diff_head);
  diff_ = new QTableWidget(diff_box);
  diff_->setObjectName("ConfigDiff");
  diff_->verticalHeader()->hide();
  diff_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  diff_->setShowGrid(false);
  diff_->setAlternatingRowColors(true);
  diff_->setTextElideMode(Qt::ElideMiddle);
  diff_->horizontalHeader()->setTextElideMode(Qt::ElideMiddle);
  dl->addWidget(diff_, 1);
  lowl->addWidget(diff_box, 3);
  // Short windows (1024 x 700): the bars, their note and the prediction table need more height
  // than is left under the chart; the pane scrolls rather than laying them over each other.
  auto* lower_scroll = new QScrollArea(vsplit);
  lower_scroll->setObjectName("CompareLowerPane");
  lower_scroll->setWidget(lower);
  lower_scroll->setWidgetResizable(true);
  lower_scroll->setFrameShape(QFrame::NoFrame);
  lower_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  vsplit->addWidget(lower_scroll);
  vsplit->setStretchFactor(0, 3);
  vsplit->setStretchFactor(1, 2);
  vsplit->setSizes({520, 340});
  chart_->setMinimumHeight(260);
  rl->addWidget(vsplit, 1);
  split->addWidget(right);
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 1);
  split->setSizes({230, 1200});
  picker_->setMinimumWidth(150);
  left->setMinimumWidth(150);

  connect(runs_model_, &RunsModel::loaded, this, &ComparePage::fill_picker);
  connect(picker_, &QListWidget::itemChanged, this, [this](QListWidgetItem*) {
    if (filling_) return;
    std::vector<store::RunId> ids;
    for (int i = 0; i < picker_->count(); ++i)
      if (picker_->item(i)->checkState() == Qt::Checked) ids.push_back(picker_->item(i)->data(Qt::UserRole).toLongLong());
    if (ids.size() > 10) {
      Q_EMIT status_message(tr("Compare shows at most 10 runs"));
      fill_picker();  // back to the previous ticks
      return;
    }
    checked_ = ids;
    reload();
  });
  for (QComboBox* c : {metric_, x_axis_, ranks_}) connect(c, &QComboBox::activated, this, [this] { reload(); });
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) { set_smoothing(v / 100.0); });
  connect(only_diff_, &QCheckBox::toggled, this, [this] { fill_diff(); });
  connect(save, &QPushButton::clicked, this, [this] {
    const QString p = QFileDialog::getSaveFileName(this, tr("Export the chart"), QStringLiteral("compare-%1.png").arg(metric_->currentText()),
                                                   tr("PNG (*.png)"));
    if (!p.isEmpty()) Q_EMIT status_message(export_chart_png(p) ? tr("Saved %1").arg(p) : tr("Could not write %1").arg(p));
  });
  connect(save_bars, &QPushButton::clicked, this, [this] {
    const QString p = QFileDialog::getSaveFileName(this, tr("Export the bars"), QStringLiteral("compare-comm.png"), tr("PNG (*.png)"));
    if (!p.isEmpty()) Q_EMIT status_message(comm_->save_png(p) ? tr("Saved %1").arg(p) : tr("Could not write %1").arg(p));
  });
  connect(chart_, &MetricChart::x_range_requested, this, [this](double a, double b) {
    CompareQuery q = model_->query();
    q.range = std::make_pair(a, b);
    model_->set_query(q);  // full resolution for the visible range
  });
  connect(chart_, &MetricChart::zoom_reset, this, [this] {
    CompareQuery q = model_->query();
    q.range.reset();
    model_->set_query(q);
  });
  connect(model_, &CompareModel::frame_ready, this, &ComparePage::draw);
  connect(model_, &CompareModel::predictions_ready, this, &ComparePage::fill_prediction);
  fill_picker();
}

void ComparePage::fill_picker() {
  filling_ = true;
  picker_->clear();
  for (const store::RunSummary& s : runs_model_->runs()) {
    const QString text = QStringLiteral("%1  #%2\n%3 · %4").arg(QString::fromStdString(s.name)).arg(s.id)
                             .arg(format_shape(s.shape), QString::fromStdString(s.status));
    auto* item = new QListWidgetItem(text, picker_);
    item->setToolTip(text);
    item->setData(Qt::UserRole, QVariant::fromValue<qint64>(s.id));
    item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable | Qt::ItemIsSelectable);
    const bool on = std::find(checked_.begin(), checked_.end(), s.id) != checked_.end();
    item->setCheckState(on ? Qt::Checked : Qt::Unchecked);
  }
  filling_ = false;
}

void ComparePage::set_runs(const std::vector<store::RunId>& ids) {
  checked_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(ids.size(), 10)));
  fill_picker();
  reload();
}

void ComparePage::set_metric(const QString& key) {
  metric_->setCurrentIndex(std::max(0, metric_->findData(key)));
  reload();
}

void ComparePage::set_x_axis(store::XAxis x) {
  x_axis_->setCurrentIndex(std::max(0, x_axis_->findData(static_cast<int>(x))));
  reload();
}

void ComparePage::set_smoothing(double w) {
  smoothing_weight_ = std::clamp(w, 0.0, 0.99);
  if (smoothing_->value() != qRound(smoothing_weight_ * 100)) smoothing_->setValue(qRound(smoothing_weight_ * 100));
  if (model_->frame()) draw(model_->frame());
}

void ComparePage::set_only_differences(bool on) { only_diff_->setChecked(on); }

void ComparePage::reload() {
  hint_->setVisible(checked_.size() < 2);
  CompareQuery q;
  q.runs = checked_;
  q.key = metric_->currentData().toString().toStdString();
  q.x = static_cast<store::XAxis>(x_axis_->currentData().toInt());
  q.aggregate = static_cast<store::Aggregate>(ranks_->currentData().toInt());
  q.pixels = std::max(200, chart_->width());
  chart_->reset_zoom();
  open_started_ns_ = now_ns();
  model_->set_query(q);
}

int ComparePage::series_count() const {
  const auto& f = model_->frame();
  return f ? static_cast<int>(f->series.size()) : 0;
}

void ComparePage::draw(const std::shared_ptr<const CompareFrame>& fp) {
  if (!fp) return;
  const CompareFrame& f = *fp;
  if (f.error) {
    Q_EMIT status_message(error_text(*f.error));
    return;
  }
  const bool smoothing = smoothing_weight_ > 0;
  chart_->clear_series();
  const QString key = metric_->currentText();
  chart_->set_title(key);
  for (size_t i = 0; i < f.series.size(); ++i) {
    const QColor c = run_color(static_cast<int>(i));
    const QString name = run_label(f.runs[i]);
    if (smoothing) {
      const int raw = chart_->add_line(name + tr(" raw"), {c, 1.0, 0.25, Qt::SolidLine, false, false});
      chart_->set_points(raw, f.series[i].points);
    }
    const int line = chart_->add_line(name, {c, 2.0, 1.0, Qt::SolidLine, true, false});
    chart_->set_points(line, smoothing ? smooth(f.series[i].points, smoothing_weight_) : f.series[i].points);
  }
  const QString xs[] = {tr("step"), tr("tokens (per data-parallel replica)"), tr("wall time (s since start)")};
  chart_->set_axis_titles(xs[x_axis_->currentIndex()], {});
  chart_->set_zoom(model_->query().range);

  QStringList cats;
  std::vector<bool> absent;
  for (size_t i = 0; i < f.runs.size(); ++i) {
    const auto& s = f.runs[i];
    cats << run_label(s);
    // Another tool's run carries no per-axis times: its column says so, rather than read as zero
    // (in the plot, where the words have room; an axis label is elided to the column's width).
    absent.push_back(i < f.comm.size() && !f.comm[i].recorded());
  }
  std::vector<BarChart::Set> sets;
  for (Axis a : kAxes) {
    BarChart::Set s{axis_label(a), axis_color(a, is_dark()), {}};
    bool any = false;
    for (size_t i = 0; i < f.comm.size(); ++i) {
      s.values.push_back(f.comm[i].mean[static_cast<size_t>(a)] * 1000.0);
      any |= f.shapes[i] && f.shapes[i]->size(a) > 1;
    }
    if (any) sets.push_back(s);  // an axis no run uses has nothing to compare
  }
  // Say how the means were made: every step, or a sample of the steps (compare_model.h).
  int64_t sampled = 0, steps = 0;
  for (const CommStats& c : f.comm)
    if (!c.exact()) sampled = c.sampled_steps, steps = std::max(steps, c.steps);
  comm_->set_data(cats, sets, tr("ms per step"), absent);
  // The names under the bars are cut to their column's width: the tooltip names each column.
  QStringList columns;
  for (int i = 0; i < cats.size(); ++i) columns << tr("column %1: %2").arg(i + 1).arg(cats[i]);
  comm_->setToolTip(columns.join('\n'));
  comm_note_->setText(steps == 0 ? tr("ms per step: the mean over ranks of every step")
                                 : tr("ms per step: the mean over ranks; long runs: %1 sampled steps in %2 windows, of up to %3")
                                       .arg(sampled).arg(kCommWindows).arg(steps));
  comm_note_->fit_height();

  while (QLayoutItem* item = thumbs_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  for (size_t i = 0; i < f.runs.size(); ++i)
    thumbs_->addWidget(new MeshThumb(f.shapes[i], run_label(f.runs[i]),
                                     run_color(static_cast<int>(i)), thumbs_->parentWidget()));
  thumbs_->addStretch();
  fill_diff();
  fill_prediction();
  last_open_ms_ = static_cast<double>(now_ns() - open_started_ns_) / 1e6;
}

void ComparePage::fill_diff() {
  const auto& f = model_->frame();
  diff_->clear();
  if (!f) return;
  const auto rows = config_diff(f->configs);
  QStringList head{tr("field")};
  for (const auto& s : f->runs) head << run_label(s);
  diff_->setColumnCount(static_cast<int>(head.size()));
  diff_->setHorizontalHeaderLabels(head);
  for (int c = 1; c < diff_->columnCount(); ++c) diff_->horizontalHeaderItem(c)->setToolTip(head[c]);
  int n = 0;
  for (const DiffRow& r : rows)
    if (r.differs || !only_diff_->isChecked()) ++n;
  diff_->setRowCount(n);
  int row = 0;
  for (const DiffRow& r : rows) {
    if (!r.differs && only_diff_->isChecked()) continue;
    const QString key = QString::fromStdString(r.key);
    auto* k = new QTableWidgetItem(key);
    // Mesh fields in their axis colour, as everywhere else.
    for (Axis a : kAxes)
      if (key == QStringLiteral("mesh.") + axis_label(a)) k->setForeground(axis_color(a, is_dark()));
    QFont bold = k->font();
    bold.setBold(r.differs);
    k->setFont(bold);
    diff_->setItem(row, 0, k);
    for (size_t i = 0; i < r.values.size(); ++i) {
      auto* v = new QTableWidgetItem(QString::fromStdString(r.values[i]));
      v->setFont(bold);
      diff_->setItem(row, static_cast<int>(i) + 1, v);
    }
    ++row;
  }
  cap_run_columns(diff_, 1);
}

int ComparePage::prediction_column(const QString& header) const {
  for (int c = 0; c < prediction_->columnCount(); ++c)
    if (const QTableWidgetItem* h = prediction_->horizontalHeaderItem(c); h && h->text() == header) return c;
  return -1;
}

void ComparePage::fill_prediction() {
  const auto& f = model_->frame();
  prediction_->clear();
  prediction_->setRowCount(0);
  if (!f || f->error) {
    prediction_->setColumnCount(0);
    return;
  }
  std::map<store::RunId, PredictionPtr> by_run;
  for (const PredictionPtr& p : model_->predictions())
    if (p) by_run[p->run] = p;
  // Axes any run communicates on, in kAxes order.
  std::vector<Axis> axes;
  for (Axis a : kAxes)
    for (const auto& [id, p] : by_run)
      if (p->prediction) {
        const auto used = communicating_axes(*p->prediction);
        if (std::find(used.begin(), used.end(), a) != used.end()) {
          axes.push_back(a);
          break;
        }
      }
  QStringList head{tr("run"), tr("step pred ms"), tr("step meas ms"), tr("step error"), tr("compute pred ms"),
                   tr("compute meas ms")};
  for (Axis a : axes) head << tr("%1 pred ms").arg(axis_label(a)) << tr("%1 meas ms").arg(axis_label(a));
  head << tr("basis");
  const int columns = static_cast<int>(head.size());
  prediction_->setColumnCount(columns);
  prediction_->setHorizontalHeaderLabels(head);
  for (int i = 0; i < static_cast<int>(axes.size()); ++i)
    for (int k = 0; k < 2; ++k)
      prediction_->horizontalHeaderItem(6 + 2 * i + k)->setForeground(axis_color(axes[static_cast<size_t>(i)], is_dark()));
  prediction_->setRowCount(static_cast<int>(f->runs.size()));
  auto cell = [&](int row, int col, const QString& text) {
    auto* item = new QTableWidgetItem(text);
    if (col > 0 && col < columns - 1) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    prediction_->setItem(row, col, item);
    return item;
  };
  for (int r = 0; r < static_cast<int>(f->runs.size()); ++r) {
    const store::RunSummary& s = f->runs[static_cast<size_t>(r)];
    QTableWidgetItem* name = cell(r, 0, run_label(s));
    name->setForeground(run_color(r));
    name->setToolTip(run_label(s));
    auto it = by_run.find(s.id);
    if (it == by_run.end() || !it->second->prediction) {
      // Not in yet, or predict_run's reason for not judging this run, in grey across the row.
      const QString text = it == by_run.end() ? tr("loading…")
                           : it->second->refusal ? QString::fromStdString(it->second->refusal->message())
                                                 : QString();
      cell(r, 1, text)->setForeground(muted_text_color());
      prediction_->item(r, 1)->setTextAlignment(Qt::AlignLeft | Qt::AlignVCenter);
      if (columns > 2) prediction_->setSpan(r, 1, 1, columns - 1);
      continue;
    }
    const store::RunPrediction& p = *it->second->prediction;
    const PredictionCheck& c = p.check;
    cell(r, 1, format_ms(c.predicted_step_s));
    cell(r, 2, format_ms(c.measured_step_s));
    cell(r, 3, format_error_percent(c.measured_step_s > 0 ? PredictionCheck::error(c.predicted_step_s, c.measured_step_s)
                                                          : std::nan("")));
    cell(r, 4, format_ms(c.predicted_compute_s));
    cell(r, 5, format_ms(c.measured_compute_s));
    for (int i = 0; i < static_cast<int>(axes.size()); ++i) {
      const Axis a = axes[static_cast<size_t>(i)];
      cell(r, 6 + 2 * i, format_ms(c.predicted_comm_s[a]));
      cell(r, 7 + 2 * i, format_ms(c.measured_comm_s[a]));
    }
    if (!p.calibrated && p.fitted_runs == 0) {
      // Core's hardware defaults, not measured on these nodes: the error says how far they are
      // from this cluster, not how good a calibrated prediction would be.
      const QString why = tr("Uncalibrated estimate: core's hardware defaults, not measured on these nodes (they can miss "
                             "by a factor of several). %1 measures the cluster.")
                              .arg(QString::fromUtf8(kCalibrateAction));
      QTableWidgetItem* basis = cell(r, columns - 1, tr("uncalibrated estimate · %1").arg(QString::fromUtf8(kCalibrateAction)));
      basis->setForeground(warning_color());
      basis->setToolTip(why);
      prediction_->item(r, 3)->setToolTip(why);
    } else {
      cell(r, columns - 1, QString::fromStdString(p.basis()))->setForeground(muted_text_color());
    }
  }
  prediction_->resizeColumnsToContents();
  prediction_->setColumnWidth(0, std::min(prediction_->columnWidth(0), kRunColumnMaxWidth));
}

bool ComparePage::export_chart_png(const QString& path) { return chart_->save_png(path); }

void ComparePage::refresh_colors() {
  chart_->apply_theme();
  comm_->apply_theme();
  if (model_->frame()) draw(model_->frame());  // the prediction table too
}

}  // namespace meshwork::ui
