#include "ui/health_panel.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QImage>
#include <QMouseEvent>
#include <QPainter>
#include <QPointer>
#include <QRadioButton>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>
#include <thread>

#include "core/handover.h"
#include "remote/rank_inspect.h"
#include "ui/mesh_view.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {

// A sequential ramp from the background to a warm bright end, readable in both themes.
QRgb ramp(double t, bool dark) {
  t = std::clamp(t, 0.0, 1.0);
  const QColor lo = dark ? QColor("#1f2a33") : QColor("#eef3f7");
  const QColor mid = dark ? QColor("#2f7f8f") : QColor("#6fb1c2");
  const QColor hi = dark ? QColor("#ffd166") : QColor("#c0392b");
  const QColor& a = t < 0.5 ? lo : mid;
  const QColor& b = t < 0.5 ? mid : hi;
  const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  return qRgb(static_cast<int>(a.red() + (b.red() - a.red()) * u), static_cast<int>(a.green() + (b.green() - a.green()) * u),
              static_cast<int>(a.blue() + (b.blue() - a.blue()) * u));
}

QString ms(double s) { return QStringLiteral("%1 ms").arg(s * 1000, 0, 'f', s < 0.01 ? 2 : 1); }

}  // namespace

StepHeatMap::StepHeatMap(QWidget* parent) : QWidget(parent) {
  setObjectName("StepHeatMap");
  setMouseTracking(true);
}

void StepHeatMap::set_heat(const store::StepHeat& heat) {
  heat_ = heat;
  update();
}

void StepHeatMap::set_value(Value v) {
  value_ = v;
  update();
}

int StepHeatMap::brightest_row() const {
  const auto& v = values();
  int best = -1;
  double best_mean = -1;
  for (int r = 0; r < heat_.rows; ++r) {
    double sum = 0;
    int n = 0;
    for (int c = 0; c < heat_.steps; ++c) {
      const double x = v[static_cast<size_t>(r) * static_cast<size_t>(heat_.steps) + static_cast<size_t>(c)];
      if (std::isnan(x)) continue;
      sum += x;
      ++n;
    }
    if (n > 0 && sum / n > best_mean) {
      best_mean = sum / n;
      best = r;
    }
  }
  return best;
}

QRectF StepHeatMap::plot_rect() const {
  const QFontMetricsF fm(font());
  return QRectF(fm.horizontalAdvance(QStringLiteral("rank 00000")) + 6, 4, width() - fm.horizontalAdvance("rank 00000") - 12,
                height() - fm.height() - 10);
}

void StepHeatMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const bool dark = is_dark();
  const QRectF plot = plot_rect();
  p.setPen(palette().color(QPalette::Text));
  if (heat_.rows == 0 || heat_.steps == 0) {
    p.drawText(rect(), Qt::AlignCenter, tr("no steps stored yet"));
    return;
  }
  const auto& v = values();
  const double top = value_ == Value::step ? heat_.max_step_s : heat_.max_wait_s;
  QImage img(heat_.steps, heat_.rows, QImage::Format_RGB32);
  for (int r = 0; r < heat_.rows; ++r) {
    auto* line = reinterpret_cast<QRgb*>(img.scanLine(r));
    for (int c = 0; c < heat_.steps; ++c) {
      const double x = v[static_cast<size_t>(r) * static_cast<size_t>(heat_.steps) + static_cast<size_t>(c)];
      line[c] = std::isnan(x) ? (dark ? qRgb(40, 40, 40) : qRgb(210, 210, 210)) : ramp(top > 0 ? x / top : 0, dark);
    }
  }
  p.drawImage(plot, img);
  const QFontMetricsF fm(font());
  p.drawText(QRectF(0, plot.top(), plot.left() - 4, fm.height()), Qt::AlignRight, tr("rank 0"));
  const int last_rank = heat_.rows * heat_.ranks_per_row - 1;
  p.drawText(QRectF(0, plot.bottom() - fm.height(), plot.left() - 4, fm.height()), Qt::AlignRight,
             tr("rank %1").arg(last_rank));
  p.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width() / 2, fm.height()), Qt::AlignLeft,
             tr("step %1").arg(heat_.first_step + 1));
  p.drawText(QRectF(plot.center().x(), plot.bottom() + 2, plot.width() / 2, fm.height()), Qt::AlignRight,
             tr("step %1 · brightest %2").arg(heat_.first_step + heat_.steps).arg(ms(top)));
}

void StepHeatMap::mouseMoveEvent(QMouseEvent* e) {
  const QRectF plot = plot_rect();
  if (heat_.rows == 0 || !plot.contains(e->position())) return;
  const int c = std::clamp(static_cast<int>((e->position().x() - plot.left()) / plot.width() * heat_.steps), 0, heat_.steps - 1);
  const int r = std::clamp(static_cast<int>((e->position().y() - plot.top()) / plot.height() * heat_.rows), 0, heat_.rows - 1);
  const size_t i = static_cast<size_t>(r) * static_cast<size_t>(heat_.steps) + static_cast<size_t>(c);
  const QString who = heat_.ranks_per_row == 1
                          ? tr("rank %1").arg(r)
                          : tr("ranks %1–%2 (the slowest)").arg(r * heat_.ranks_per_row).arg((r + 1) * heat_.ranks_per_row - 1);
  QToolTip::showText(e->globalPosition().toPoint(),
                     tr("%1, step %2: step %3, waiting %4")
                         .arg(who)
                         .arg(heat_.first_step + c + 1)
                         .arg(std::isnan(heat_.step_s[i]) ? QStringLiteral("—") : ms(heat_.step_s[i]))
                         .arg(std::isnan(heat_.wait_s[i]) ? QStringLiteral("—") : ms(heat_.wait_s[i])),
                     this);
}

HealthPanel::HealthPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("HealthPanel");
  auto* outer = new QVBoxLayout(this);
  summary_ = new QLabel(tr("No run shown"), this);
  summary_->setObjectName("HealthSummary");
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(summary_);

  auto* split = new QSplitter(Qt::Horizontal, this);
  mesh_ = new MeshView(split);
  mesh_->setObjectName("HealthMesh");
  auto* side = new QWidget(split);
  auto* sl = new QVBoxLayout(side);
  sl->setContentsMargins(0, 0, 0, 0);
  culprits_ = new QTableWidget(0, 6, side);
  culprits_->setObjectName("Culprits");
  culprits_->setHorizontalHeaderLabels({tr("rank"), tr("node"), tr("pid"), tr("process"), tr("phase"), tr("waited by")});
  culprits_->verticalHeader()->setVisible(false);
  culprits_->horizontalHeader()->setStretchLastSection(true);
  culprits_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  culprits_->setSelectionBehavior(QAbstractItemView::SelectRows);
  culprits_->setSelectionMode(QAbstractItemView::SingleSelection);
  sl->addWidget(culprits_, 1);
  fetch_ = new QPushButton(tr("Fetch stack from its node"), side);
  fetch_->setObjectName("FetchStack");
  fetch_->setToolTip(tr("Every thread's native stack of the selected rank (gdb, eu-stack, or the kernel's wchan and "
                        "/proc/PID/stack) and the last lines of its log, read on its node"));
  fetch_->setEnabled(false);
  sl->addWidget(fetch_);
  stack_ = new QPlainTextEdit(side);
  stack_->setObjectName("StackText");
  stack_->setReadOnly(true);
  stack_->setLineWrapMode(QPlainTextEdit::NoWrap);
  stack_->setPlaceholderText(tr("A culprit's stack and log tail appear here"));
  sl->addWidget(stack_, 2);
  split->addWidget(mesh_);
  split->addWidget(side);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  outer->addWidget(split, 3);

  auto* heat_head = new QHBoxLayout;
  heat_caption_ = new QLabel(tr("Per rank and step"), this);
  heat_head->addWidget(heat_caption_);
  auto* step_btn = new QRadioButton(tr("step time"), this);
  auto* wait_btn = new QRadioButton(tr("waiting in collectives"), this);
  step_btn->setChecked(true);
  auto* group = new QButtonGroup(this);
  group->addButton(step_btn);
  group->addButton(wait_btn);
  heat_head->addWidget(step_btn);
  heat_head->addWidget(wait_btn);
  heat_head->addStretch();
  outer->addLayout(heat_head);
  heat_ = new StepHeatMap(this);
  outer->addWidget(heat_, 1);
  connect(step_btn, &QRadioButton::toggled, this,
          [this](bool on) { heat_->set_value(on ? StepHeatMap::Value::step : StepHeatMap::Value::wait); });
  connect(fetch_, &QPushButton::clicked, this, &HealthPanel::fetch_stack);
  connect(culprits_, &QTableWidget::itemSelectionChanged, this, [this] {
    const auto rows = culprits_->selectionModel()->selectedRows();
    if (!rows.isEmpty()) mesh_->set_selected_rank(culprits_->item(rows.first().row(), 0)->text().toInt());
  });
}

void HealthPanel::show_report(const HealthPtr& report) {
  report_ = report;
  if (!report) return;
  if (report->error) {
    summary_->setText(QString::fromStdString(report->error->message()));
    return;
  }
  const Diagnosis& d = report->diagnosis;
  QString text = QString::fromStdString(d.summary());
  if (!report->live) text = tr("The run ended (%1): nothing to diagnose.").arg(QString::fromStdString(report->status));
  for (const std::string& n : d.notes) {
    if (report->live) text += QStringLiteral("\n") + QString::fromStdString(n);
  }
  if (report->live && (!report->follower_age_s || *report->follower_age_s > 10))
    text += tr("\nNo follower is writing the ranks' states (the workbench or `meshwork attach` follows a run).");
  summary_->setText(text);
  const bool bad = d.state != HealthState::healthy;
  summary_->setProperty("role", bad ? "error" : "");
  summary_->style()->unpolish(summary_);
  summary_->style()->polish(summary_);

  const int world = static_cast<int>(report->shape.world_size());
  if (world != world_shown_ || !(report->shape == shape_shown_)) {
    Result<DeviceMesh> m = DeviceMesh::create(report->shape, std::max(1, report->ranks_per_node));
    mesh_->set_mesh(m ? std::optional<DeviceMesh>(*m) : std::nullopt,
                    std::vector<bool>(static_cast<size_t>(report->node_names.size()), true), report->node_names);
    world_shown_ = world;
    shape_shown_ = report->shape;
  }
  mesh_->set_rank_health(report->states, report->notes);

  culprits_->setRowCount(0);
  for (const Culprit& c : d.culprits) {
    const int row = culprits_->rowCount();
    culprits_->insertRow(row);
    const QString node = QStringLiteral("%1%2").arg(c.node).arg(c.host.empty() ? QString() : QStringLiteral(" (%1)").arg(QString::fromStdString(c.host)));
    QString process = QString::fromStdString(c.process.empty() ? std::string("unknown") : c.process);
    if (!c.ended.empty()) process += QStringLiteral(" · ") + QString::fromStdString(c.ended);
    std::vector<int> waiters = c.waited_by;
    const QStringList cells = {QString::number(c.rank), node, QString::number(c.pid), process, QString::fromStdString(c.phase),
                               QString::fromStdString(rank_ranges(waiters))};
    for (int col = 0; col < cells.size(); ++col) culprits_->setItem(row, col, new QTableWidgetItem(cells[col]));
  }
  culprits_->resizeColumnsToContents();
  fetch_->setEnabled(!d.culprits.empty() && report->live);
  heat_->set_heat(report->heat);
  heat_caption_->setText(report->heat.ranks_per_row > 1
                             ? tr("Per rank and step (each row: %1 ranks, the slowest)").arg(report->heat.ranks_per_row)
                             : tr("Per rank and step"));
}

void HealthPanel::fetch_stack() {
  if (!report_ || report_->diagnosis.culprits.empty()) return;
  int rank = report_->diagnosis.culprits.front().rank;
  const auto rows = culprits_->selectionModel()->selectedRows();
  if (!rows.isEmpty()) rank = culprits_->item(rows.first().row(), 0)->text().toInt();
  fetch_->setEnabled(false);
  stack_->setPlainText(tr("Reading rank %1's stack on its node…").arg(rank));
  const std::filesystem::path db = db_.toStdString();
  const store::RunId run = report_->run;
  const remote::SshOptions ssh = ssh_ ? ssh_() : remote::SshOptions{};
  QPointer<HealthPanel> self(this);
  // SSH and gdb take seconds: never on the GUI thread.
  std::thread([self, db, run, rank, ssh] {
    Result<remote::RankInspection> r = remote::inspect_rank(db, run, rank, ssh);
    QString text;
    if (r) {
      text = QObject::tr("rank %1 on node %2 (%3), pid %4, stack by %5:\n")
                 .arg(r->rank)
                 .arg(r->node)
                 .arg(QString::fromStdString(r->host))
                 .arg(r->pid)
                 .arg(QString::fromStdString(r->tool)) +
             QString::fromStdString(r->stack) + QObject::tr("\nlast lines of its log:\n") + QString::fromStdString(r->log_tail);
    } else {
      text = QString::fromStdString(r.error().message());
    }
    const bool ok = r.ok();
    if (!self) return;
    QMetaObject::invokeMethod(self.data(), handed_over([self, text, rank, ok] {
                                if (!self) return;
                                self->stack_->setPlainText(text);
                                self->fetch_->setEnabled(true);
                                Q_EMIT self->stack_fetched(rank, ok);
                              }),
                              Qt::QueuedConnection);
  }).detach();
}

}  // namespace meshwork::ui
