#include "ui/planner_panel.h"

#include <algorithm>
#include <map>

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QVBoxLayout>

#include "ui/axis_colors.h"
#include "ui/panel_widgets.h"
#include "ui/planner_model.h"
#include "ui/plan_state.h"
#include "ui/routing_model.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
// Comm share cell: a bar in the axis colour under the percentage.
class ShareDelegate : public QStyledItemDelegate {
 public:
  ShareDelegate(Axis axis, QObject* parent) : QStyledItemDelegate(parent), axis_(axis) {}
  void paint(QPainter* p, const QStyleOptionViewItem& opt, const QModelIndex& idx) const override {
    QStyledItemDelegate::paint(p, opt, idx);
    const double share = idx.data(PlannerModel::ShareRole).toDouble();
    if (share <= 0) return;
    QColor c = axis_color(axis_, is_dark());
    c.setAlphaF(0.8);
    const QRectF r = QRectF(opt.rect).adjusted(6, opt.rect.height() - 6, -6, -2);
    p->save();
    p->setPen(Qt::NoPen);
    p->setBrush(c);
    p->drawRoundedRect(QRectF(r.left(), r.top(), r.width() * std::min(1.0, share), r.height()), 1.5, 1.5);
    p->restore();
  }

 private:
  Axis axis_;
};
}  // namespace

PlannerPanel::PlannerPanel(PlanState* state, QWidget* parent)
    : QWidget(parent), state_(state), model_(new PlannerModel(this)), proxy_(new QSortFilterProxyModel(this)) {
  setObjectName("PlannerPanel");
  auto* lay = new_column_layout(this, {0, 0, 0, 0}, 4);
  status_ = new WrappedLabel(this);
  status_->setObjectName("planner_status");
  status_->setProperty("role", "muted");
  status_->setContentsMargins(8, 4, 8, 0);
  status_->setWordWrap(true);
  // The status over the panel's width (a note of several lines stays short), then "Try the top
  // [K] for [N] steps" at the right: side by side, a long note made the panel tall and wide.
  lay->addWidget(status_);
  auto* top = new QHBoxLayout;
  top->setContentsMargins(8, 0, 8, 0);
  top->setSpacing(4);
  routing_label_ = new QLabel(tr("Routing"), this);
  routing_choice_ = new QComboBox(this);
  routing_choice_->setObjectName("RoutingChoice");
  routing_choice_->setToolTip(tr("What the expert-parallel shapes assume: the tokens per expert a stored run of this "
                                 "model measured (each ep's busiest rank over the mean, for step time and memory), or "
                                 "balanced routing"));
  routing_label_->setBuddy(routing_choice_);
  routing_label_->hide();
  routing_choice_->hide();
  top->addWidget(routing_label_);
  top->addWidget(routing_choice_);
  top->addStretch(1);
  trial_count_ = new_spin_box(this, "TrialCount", 1, 16, 3, tr("How many of the best predicted shapes that fit to try"));
  trial_count_->setPrefix(tr("K = "));
  trial_steps_ = new_spin_box(this, "TrialSteps", 1, 100000, 20, tr("Optimizer steps each trial runs"));
  trial_steps_->setSuffix(tr(" steps"));
  try_ = new QPushButton(this);
  try_->setObjectName("TryTopK");  // its text and tooltip: update_try()
  top->addWidget(trial_count_);
  top->addWidget(trial_steps_);
  top->addWidget(try_);
  lay->addLayout(top);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(PlannerModel::SortRole);
  table_ = new QTableView(this);
  table_->setObjectName("PlannerTable");
  table_->setModel(proxy_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSortingEnabled(true);
  table_->sortByColumn(PlannerModel::Rank, Qt::AscendingOrder);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(24);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->setShowGrid(false);
  for (int i = 0; i < kAxisCount; ++i)
    table_->setItemDelegateForColumn(PlannerModel::CommFirst + i, new ShareDelegate(kAxes[static_cast<size_t>(i)], table_));
  lay->addWidget(table_);

  connect(table_, &QTableView::clicked, this, [this](const QModelIndex& idx) { apply_row(idx.row()); });
  connect(table_, &QTableView::activated, this, [this](const QModelIndex& idx) { apply_row(idx.row()); });
  connect(trial_count_, &QSpinBox::valueChanged, this, &PlannerPanel::update_try);
  connect(try_, &QPushButton::clicked, this, [this] {
    if (try_->isEnabled()) Q_EMIT try_requested(trial_count_->value(), trial_steps_->value());
  });
  connect(state_, &PlanState::plan_changed, this, &PlannerPanel::refresh);
  connect(state_, &PlanState::changed, this, [this] {
    if (state_->mesh()) model_->set_current_shape(state_->mesh()->shape());
  });
  refresh();
}

void PlannerPanel::set_routing(RoutingModel* routing) {
  routing_ = routing;
  connect(routing_, &RoutingModel::changed, this, [this] {
    update_routing_choice();
    refresh();
  });
  connect(routing_choice_, &QComboBox::activated, this, [this](int index) {
    routing_->set_choice(routing_choice_->itemData(index).toLongLong());
  });
  update_routing_choice();
}

void PlannerPanel::update_routing_choice() {
  const bool moe = routing_ && routing_->moe();
  routing_label_->setVisible(moe);
  routing_choice_->setVisible(moe);
  if (!moe) return;
  const QSignalBlocker quiet(routing_choice_);
  routing_choice_->clear();
  routing_choice_->addItem(tr("balanced"), QVariant::fromValue<qlonglong>(RoutingModel::kBalanced));
  for (const store::RoutingRun& r : routing_->runs())
    routing_choice_->addItem(r.name.empty() ? tr("as run %1 measured it").arg(r.id)
                                            : tr("as run %1 (%2) measured it").arg(r.id).arg(QString::fromStdString(r.name)),
                             QVariant::fromValue<qlonglong>(r.id));
  // The newest run is chosen by default; a run chosen by id stays chosen while it is offered.
  const store::RunId shown = routing_->routing() ? routing_->routing_run() : RoutingModel::kBalanced;
  routing_choice_->setCurrentIndex(std::max(0, routing_choice_->findData(QVariant::fromValue<qlonglong>(shown))));
}

QString PlannerPanel::routing_notice() const {
  if (!routing_ || !routing_->moe()) return {};
  QString text;
  if (!routing_->error().isEmpty()) text += tr("<br>⚠ Routing: %1.").arg(routing_->error().toHtmlEscaped());
  const std::shared_ptr<const MeasuredRouting>& measured = state_->cluster().routing;
  if (!measured) {
    return text + (routing_->choice() == RoutingModel::kBalanced || !routing_->runs().empty()
                       ? tr("<br>Routing taken as balanced: every ep rank gets its share of the tokens.")
                       : tr("<br>Routing taken as balanced: no stored run of this model measured it (a run of it "
                            "gives each ep its measured imbalance)."));
  }
  // Each ep's imbalances as the planner applied them to its rows.
  std::map<int, std::pair<double, double>> per_ep;
  for (const PlanRow& r : state_->plan())
    if (r.entry.shape.ep > 1) per_ep[r.entry.shape.ep] = {r.entry.step_imbalance, r.entry.memory_imbalance};
  QStringList eps;
  for (const auto& [ep, g] : per_ep) eps << tr("ep %1: ×%2 step, ×%3 memory").arg(ep).arg(g.first, 0, 'f', 2).arg(g.second, 0, 'f', 2);
  text += tr("<br>Routing as %1 measured it (%2), busiest ep rank over the mean")
              .arg(QString::fromStdString(measured->source()).toHtmlEscaped(),
                   measured->steps() == 1 ? tr("1 step") : tr("%1 steps").arg(measured->steps()));
  text += eps.isEmpty() ? QStringLiteral(".") : QStringLiteral(": ") + eps.join(QStringLiteral("; ")) + QStringLiteral(".");
  return text;
}

void PlannerPanel::apply_row(int view_row) {
  const QModelIndex src = proxy_->mapToSource(proxy_->index(view_row, 0));
  if (!src.isValid()) return;
  apply_shape(model_->row_at(src.row()).entry.shape);
}

void PlannerPanel::apply_shape(const MeshShape& shape) { state_->set_shape(shape); }

void PlannerPanel::set_trials_running(bool running) {
  trials_running_ = running;
  update_try();
}

void PlannerPanel::update_try() {
  int fits = 0;
  for (const PlanRow& r : state_->plan()) fits += r.entry.fits;
  try_->setText(tr("Try the top %1").arg(trial_count_->value()));
  try_->setEnabled(fits > 0 && !trials_running_);
  if (trials_running_) try_->setToolTip(tr("Trials are running (the Trials tab)"));
  else if (fits == 0) try_->setToolTip(tr("No shape fits in memory: nothing to try"));
  else
    try_->setToolTip(tr("Launch the %1 best predicted shapes that fit (of %2), one after another, for a few steps "
                        "each on the cluster, and rank them by the tokens/s they measured (the Trials tab)")
                         .arg(std::min(fits, trial_count_->value()))
                         .arg(fits));
}

QString PlannerPanel::status_text() const { return status_->text(); }

QString PlannerPanel::basis_notice() const {
  QString text;
  const ClusterFacts& c = state_->cluster();
  bool uncalibrated = false;
  for (const PlanRow& r : state_->plan())
    uncalibrated = uncalibrated || time_basis(r).rfind("uncalibrated", 0) == 0;
  if (uncalibrated)
    text += tr("<br>⚠ Uncalibrated estimates (core's hardware defaults, not measured here; they can miss by a factor "
               "of several): %1 measures this cluster.")
                .arg(QString::fromUtf8(kCalibrateAction));
  if (!c.fit_refusal.empty())
    text += tr("<br>Not fitted to the stored runs: %1.").arg(QString::fromStdString(c.fit_refusal).toHtmlEscaped());
  if (!c.oversubscription.empty())
    text += tr("<br>⚠ %1.").arg(QString::fromStdString(c.oversubscription).toHtmlEscaped());
  return text;
}

void PlannerPanel::refresh() {
  model_->set_rows(state_->plan());
  if (state_->mesh()) model_->set_current_shape(state_->mesh()->shape());
  if (!state_->plan_error().empty()) {
    status_->setText(QString::fromStdString(state_->plan_error()));
  } else {
    int fits = 0;
    for (const PlanRow& r : state_->plan()) fits += r.entry.fits;
    QString text = tr("%1 valid shapes for %2 ranks, %3 fit in memory · ranked by core's planner · "
                      "click a row to apply it")
                       .arg(state_->plan().size())
                       .arg(state_->cluster().world_size)
                       .arg(fits);
    text += basis_notice();
    text += routing_notice();
    status_->setText(text);
  }
  status_->fit_height();
  // Fixed widths sized for the formatted numbers, so all columns fit beside the inspector.
  static const int kWidths[] = {34, 112, 58, 88, 108, 56, 86, 48, 78, 56, 48, 48, 150};
  static_assert(sizeof kWidths / sizeof kWidths[0] == PlannerModel::ColumnCount);
  for (int c = 0; c < PlannerModel::ColumnCount; ++c) table_->setColumnWidth(c, kWidths[c]);
  // The pp column only when a shape has stages (the planner enumerates pp only when asked).
  bool staged = false;
  for (const PlanRow& r : state_->plan()) staged = staged || r.entry.shape[Axis::pp] > 1;
  table_->setColumnHidden(PlannerModel::CommFirst + static_cast<int>(axis_index(Axis::pp)), !staged);
  update_try();
}

}  // namespace meshwork::ui
