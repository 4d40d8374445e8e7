#include "ui/calibration_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <iterator>
#include <map>

#include "ui/bandwidth_chart.h"
#include "ui/calibration_model.h"
#include "ui/panel_widgets.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
QString q(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// One hue per collective (Okabe-Ito, as the axis colours), lighter for the dark theme.
QColor op_color(Collective op, bool dark) {
  static const char* light[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00"};
  static const char* dark_tints[] = {"#56B4E9", "#F0A35E", "#3FC99B", "#E3A6C9", "#F5C04A"};
  static_assert(std::size(light) == std::size(kCollectives) && std::size(dark_tints) == std::size(kCollectives));
  const int i = static_cast<int>(op);
  return QColor(dark ? dark_tints[i] : light[i]);
}

QTableView* make_table(QAbstractItemModel* model, const QString& name, QWidget* parent) {
  auto* t = new QTableView(parent);
  t->setObjectName(name);
  t->setModel(model);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setAlternatingRowColors(true);
  t->verticalHeader()->hide();
  t->horizontalHeader()->setStretchLastSection(true);
  t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  t->setWordWrap(false);
  return t;
}

// A table of `model` under a bold title, in a box of `tables` (the splitter it is added to).
QTableView* add_titled_table(QSplitter* tables, const QString& title, QAbstractItemModel* model, const QString& name) {
  auto* box = new QWidget(tables);
  auto* lay = new QVBoxLayout(box);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(new QLabel(title, box));
  QTableView* t = make_table(model, name, box);
  lay->addWidget(t);
  tables->addWidget(box);
  return t;
}
}  // namespace

CalibrationView::CalibrationView(CalibrationModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setObjectName("CalibrationView");
  auto* lay = new_column_layout(this, {14, 12, 14, 12}, 8);

  auto* top = new QHBoxLayout;
  auto* which = new QLabel(tr("Calibration:"), this);
  selector_ = new QComboBox(this);
  selector_->setObjectName("CalibrationSelector");
  selector_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  selector_->setToolTip(tr("Stored calibrations, newest first: cluster fingerprint · measured · nodes · device"));
  calibrate_ = new QPushButton(tr("Calibrate"), this);
  calibrate_->setObjectName("CalibrateButton");
  top->addWidget(which);
  top->addWidget(selector_, 1);
  top->addWidget(calibrate_);
  lay->addLayout(top);

  progress_ = new QLabel(this);
  progress_->setObjectName("CalibrationProgress");
  progress_->setProperty("role", "muted");
  progress_->setWordWrap(true);
  progress_->hide();
  lay->addWidget(progress_);

  details_ = new QLabel(this);
  details_->setObjectName("CalibrationDetails");
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(details_);

  empty_ = new QLabel(tr("No calibration is stored yet. Calibrate runs `meshtrain calibrate` on the cluster's nodes "
                         "(matmuls of the model's shapes, and all-reduce, all-gather, reduce-scatter and send/recv "
                         "from 4 KiB to 16 MiB); until then the time estimates use core's hardware defaults."),
                      this);
  empty_->setObjectName("CalibrationEmpty");
  empty_->setProperty("role", "muted");
  empty_->setWordWrap(true);
  lay->addWidget(empty_);

  auto* split = new QSplitter(Qt::Vertical, this);
  auto* tables = new QSplitter(Qt::Horizontal, split);
  matmul_ = add_titled_table(tables, tr("<b>Matmul rates</b>"), model_->matmul_table(), "MatmulTable");
  collective_ = add_titled_table(tables, tr("<b>Collective fits</b> t(x) = latency + x / bandwidth, x = bytes one rank sends"),
                                 model_->collective_table(), "CollectiveTable");
  collective_->horizontalHeader()->setStretchLastSection(false);
  tables->setStretchFactor(0, 2);
  tables->setStretchFactor(1, 3);
  tables->setSizes({440, 660});  // scaled to the width it gets: both tables' columns fit at 1,100 px
  chart_ = new BandwidthChart(tr("Bus bandwidth by message size"), split);
  chart_->setObjectName("BandwidthChart");
  split->addWidget(tables);
  split->addWidget(chart_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  split->setSizes({250, 450});
  lay->addWidget(split, 1);

  connect(selector_, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (index != model_->selected_index()) model_->select(index);
  });
  connect(calibrate_, &QPushButton::clicked, this, &CalibrationView::calibrate_requested);
  connect(model_, &CalibrationModel::loaded, this, &CalibrationView::rebuild_selector);
  connect(model_, &CalibrationModel::selection_changed, this, &CalibrationView::show_selected);
  rebuild_selector();
  show_selected();
}

void CalibrationView::rebuild_selector() {
  const QSignalBlocker block(selector_);
  selector_->clear();
  for (int i = 0; i < model_->count(); ++i)
    selector_->addItem(model_->label(i), QVariant::fromValue<qlonglong>(model_->calibrations()[size_t(i)].id));
  selector_->setCurrentIndex(model_->selected_index());
  selector_->setEnabled(model_->count() > 0);
  empty_->setVisible(model_->count() == 0);
  if (!model_->error().isEmpty()) {
    empty_->setText(model_->error());
    empty_->show();
  }
}

void CalibrationView::show_selected() {
  {
    const QSignalBlocker block(selector_);
    if (selector_->currentIndex() != model_->selected_index()) selector_->setCurrentIndex(model_->selected_index());
  }
  const store::StoredCalibration* s = model_->selected();
  if (!s) {
    details_->clear();
    details_->hide();
    chart_->set_curves({});
    return;
  }
  const Calibration& c = s->calibration;
  QStringList nodes;
  for (const ClusterFingerprint::Node& n : c.fingerprint.nodes) {
    QString node = QStringLiteral("%1 (%2 × %3").arg(q(n.host)).arg(n.devices).arg(q(n.device_name));
    if (n.cores > 0) node += tr(", %n core(s)", nullptr, n.cores);
    nodes << node + ")";
  }
  QString text = tr("Cluster <b>%1</b> · %2 · measured %3")
                     .arg(q(c.fingerprint.id()), q(to_string(c.fingerprint.device)), q(c.measured_at).toHtmlEscaped());
  if (s->run) text += tr(" · run %1").arg(*s->run);
  if (c.step_efficiency > 0) text += tr(" · step efficiency %1 %").arg(100 * c.step_efficiency, 0, 'f', 0);
  if (c.step_band() > 0)
    text += tr(" · its own noise: drift %1 %, spread %2 % (predictions ± %3 %)")
                .arg(100 * c.step_drift, 0, 'f', 0)
                .arg(100 * c.step_spread, 0, 'f', 0)
                .arg(100 * c.step_band(), 0, 'f', 0);
  text += QStringLiteral("<br>") + nodes.join(QStringLiteral(", ")).toHtmlEscaped();
  if (!c.step_factors.empty()) {
    // The split steps' factors: what a training step costs against each formula.
    QStringList factors;
    for (const FitFactor& f : c.step_factors)
      factors << (f.per_step_s > 0 ? QStringLiteral("%1 ×%2 + %3 ms")
                                         .arg(q(f.key.to_string()))
                                         .arg(f.factor, 0, 'f', 2)
                                         .arg(1e3 * f.per_step_s, 0, 'f', 1)
                                   : QStringLiteral("%1 ×%2").arg(q(f.key.to_string())).arg(f.factor, 0, 'f', 2));
    text += QStringLiteral("<br>") + tr("Split steps: ") + factors.join(QStringLiteral(", ")).toHtmlEscaped();
  }
  details_->setText(text);
  details_->show();

  // Colour by collective, dashed across nodes, darker for larger groups of the same kind.
  const bool dark = is_dark();
  std::map<std::pair<int, int>, std::vector<int>> sizes;  // (link, op) -> group sizes, in order
  for (const BandwidthCurve& b : model_->curves())
    sizes[{int(b.link), int(b.op)}].push_back(b.group_size);
  std::vector<BandwidthChart::Curve> curves;
  for (const BandwidthCurve& b : model_->curves()) {
    BandwidthChart::Curve k;
    k.name = b.name;
    const auto& ns = sizes[{int(b.link), int(b.op)}];
    const int rank = int(std::count_if(ns.begin(), ns.end(), [&](int n) { return n < b.group_size; }));
    k.color = op_color(b.op, dark).darker(100 + 25 * rank);
    k.pen = b.link == LinkKind::inter_node ? Qt::DashLine : Qt::SolidLine;
    k.bytes = b.bytes;
    k.bytes_per_s = b.bytes_per_s;
    curves.push_back(std::move(k));
  }
  chart_->set_curves(curves);
}

void CalibrationView::set_progress(bool running, const QString& line) {
  running_ = running;
  progress_->setText(line);
  progress_->setVisible(!line.isEmpty());
  calibrate_->setEnabled(!running_ && refusal_.isEmpty());
  calibrate_->setText(running ? tr("Calibrating…") : tr("Calibrate"));
}

void CalibrationView::set_calibrate_target(const QString& target, const QString& refusal) {
  refusal_ = refusal;
  calibrate_->setEnabled(!running_ && refusal_.isEmpty());
  calibrate_->setToolTip(refusal.isEmpty() ? tr("Measure %1 again: matmul rates, collective fits and split steps").arg(target)
                                           : refusal);
}

void CalibrationView::apply_theme() {
  chart_->apply_theme();
  show_selected();
}

}  // namespace meshwork::ui
