#include "ui/expert_load_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QLinearGradient>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/axis_colors.h"
#include "ui/chart_style.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {

constexpr int kLabelWidth = 44;    // expert names left of the cells
constexpr int kLegendWidth = 64;   // the colour scale right of them
constexpr int kStripHeight = 46;   // the max/mean line under them
constexpr int kAxisHeight = 18;    // the step labels under the strip
constexpr double kRatioClamp = 2;  // log2 of the largest ratio the scale tells apart (4x)

QColor mix(const QColor& a, const QColor& b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

// Blue for an expert starved of tokens (Okabe-Ito blue; its light tint on the dark theme).
QColor under_color(bool dark) { return dark ? QColor(0x56, 0xb4, 0xe9) : QColor(0x00, 0x72, 0xb2); }
QColor even_color(bool dark) { return dark ? QColor(0x3a, 0x3f, 0x47) : QColor(0xee, 0xee, 0xea); }

QString steps_text(const store::ExpertLoadColumn& c) {
  return c.first_step == c.last_step ? QObject::tr("step %1").arg(c.first_step)
                                     : QObject::tr("steps %1–%2").arg(c.first_step).arg(c.last_step);
}

}  // namespace

ExpertLoadView::ExpertLoadView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("ExpertLoadView"));
  setAttribute(Qt::WA_StyledBackground, true);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(10, 8, 10, 8);
  outer->setSpacing(4);
  auto* head = new QHBoxLayout;
  title_ = new QLabel(tr("Expert load"), this);
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  head->addWidget(title_);
  layers_ = new QComboBox(this);
  layers_->setObjectName(QStringLiteral("ExpertLayerPicker"));
  layers_->setToolTip(tr("The sparse layer whose routing the map shows"));
  head->addWidget(layers_);
  imbalance_ = new QLabel(this);
  imbalance_->setObjectName(QStringLiteral("ExpertImbalance"));
  head->addWidget(imbalance_);
  head->addStretch(1);
  aux_ = new QLabel(this);
  aux_->setObjectName(QStringLiteral("ExpertAuxLoss"));
  head->addWidget(aux_);
  outer->addLayout(head);
  map_ = new ExpertHeatMap(this);
  outer->addWidget(map_, 1);
  connect(layers_, &QComboBox::activated, this, [this](int index) {
    const QVariant layer = layers_->itemData(index);
    if (layer.isValid()) Q_EMIT layer_chosen(layer.toInt());
  });
  apply_theme();
}

void ExpertLoadView::set_map(const std::vector<int>& layers, const std::optional<store::ExpertLoadMap>& map) {
  {
    const QSignalBlocker quiet(layers_);
    bool same = layers_->count() == static_cast<int>(layers.size());
    for (int i = 0; same && i < layers_->count(); ++i) same = layers_->itemData(i).toInt() == layers[static_cast<size_t>(i)];
    if (!same) {
      layers_->clear();
      for (int l : layers) layers_->addItem(tr("layer %1").arg(l), l);
    }
    if (map) layers_->setCurrentIndex(layers_->findData(map->layer));
  }
  map_->set_map(map);
  if (!map || map->columns.empty()) {
    imbalance_->setText(tr("no routing stored yet"));
    aux_->clear();
    return;
  }
  const store::ExpertLoadColumn& last = map->columns.back();
  imbalance_->setText(tr("max/mean %1 now · worst %2 at step %3")
                          .arg(last.imbalance, 0, 'f', 2)
                          .arg(map->max_imbalance, 0, 'f', 2)
                          .arg(map->max_imbalance_step));
  aux_->setText(last.aux_loss ? tr("aux loss %1 (%2)").arg(*last.aux_loss, 0, 'f', 4).arg(steps_text(last)) : QString());
}

void ExpertLoadView::apply_theme() {
  setStyleSheet(QStringLiteral("QWidget#ExpertLoadView { background: %1; border: 1px solid %2; border-radius: 6px; }")
                    .arg(card_color().name(), border_color().name()));
  for (QLabel* l : {imbalance_, aux_}) {
    l->setFont(small_chart_font(this));
    l->setStyleSheet(QStringLiteral("color: %1").arg(muted_text_color().name()));
  }
  map_->update();
}

ExpertHeatMap::ExpertHeatMap(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("ExpertHeatMap"));
  setMinimumSize(220, 240);  // rows of ~20 px for 8 experts, under the strip and the step labels
  setMouseTracking(true);
}

void ExpertHeatMap::set_map(const std::optional<store::ExpertLoadMap>& map) {
  map_ = map;
  ratios_.clear();
  if (map_)
    for (const store::ExpertLoadColumn& c : map_->columns) {
      std::vector<double> r = store::load_ratios(c.tokens);
      r.resize(static_cast<size_t>(map_->experts), 0.0);
      ratios_.push_back(std::move(r));
    }
  update();
}

double ExpertHeatMap::ratio(int column, int expert) const {
  if (column < 0 || column >= columns() || expert < 0 || expert >= experts()) return 0;
  return ratios_[static_cast<size_t>(column)][static_cast<size_t>(expert)];
}

QColor ExpertHeatMap::ratio_color(double ratio, bool dark) {
  const double l = ratio > 0 ? std::clamp(std::log2(ratio), -kRatioClamp, kRatioClamp) : -kRatioClamp;
  return l < 0 ? mix(even_color(dark), under_color(dark), -l / kRatioClamp)
               : mix(even_color(dark), expert_color(dark), l / kRatioClamp);
}

QColor ExpertHeatMap::cell_color(int column, int expert) const { return ratio_color(ratio(column, expert), is_dark()); }

QString ExpertHeatMap::tooltip(int column, int expert) const {
  if (column < 0 || column >= columns() || expert < 0 || expert >= experts()) return {};
  const store::ExpertLoadColumn& c = map_->columns[static_cast<size_t>(column)];
  const double tokens = static_cast<size_t>(expert) < c.tokens.size() ? c.tokens[static_cast<size_t>(expert)] : 0;
  QString text = tr("%1 · layer %2 · expert %3: %4 tokens%5, %6 × mean")
                     .arg(steps_text(c))
                     .arg(map_->layer)
                     .arg(expert)
                     .arg(tokens, 0, 'f', c.first_step == c.last_step ? 0 : 1)
                     .arg(c.first_step == c.last_step ? QString() : tr(" (mean)"))
                     .arg(ratio(column, expert), 0, 'f', 2);
  text += tr("\nmax/mean of the step: %1").arg(c.imbalance, 0, 'f', 2);
  if (c.aux_loss) text += tr(" · aux loss %1").arg(*c.aux_loss, 0, 'f', 4);
  return text;
}

QRect ExpertHeatMap::cells_area() const {
  return QRect(kLabelWidth, 2, std::max(1, width() - kLabelWidth - kLegendWidth),
               std::max(1, height() - 2 - kStripHeight - kAxisHeight));
}

QRect ExpertHeatMap::strip_area() const {
  const QRect c = cells_area();
  return QRect(c.left(), c.bottom() + 6, c.width(), kStripHeight - 8);
}

QRect ExpertHeatMap::cell_rect(int column, int expert) const {
  const QRect a = cells_area();
  if (columns() == 0 || experts() == 0) return {};
  const double w = static_cast<double>(a.width()) / columns(), h = static_cast<double>(a.height()) / experts();
  const int x0 = a.left() + static_cast<int>(std::floor(column * w)), x1 = a.left() + static_cast<int>(std::floor((column + 1) * w));
  const int y0 = a.top() + static_cast<int>(std::floor(expert * h)), y1 = a.top() + static_cast<int>(std::floor((expert + 1) * h));
  return QRect(QPoint(x0, y0), QPoint(std::max(x0, x1 - 1), std::max(y0, y1 - 1)));
}

std::pair<int, int> ExpertHeatMap::cell_at(QPoint p) const {
  const QRect a = cells_area();
  if (!a.contains(p) || columns() == 0 || experts() == 0) return {-1, -1};
  const int c = std::min(columns() - 1, (p.x() - a.left()) * columns() / a.width());
  const int e = std::min(experts() - 1, (p.y() - a.top()) * experts() / a.height());
  return {c, e};
}

bool ExpertHeatMap::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const auto [c, x] = cell_at(help->pos());
    if (c >= 0) QToolTip::showText(help->globalPos(), tooltip(c, x), this, cell_rect(c, x));
    else QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

void ExpertHeatMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const bool dark = is_dark();
  const QColor muted = muted_text_color();
  const QFont font = small_chart_font(this);
  p.setFont(font);
  const QRect a = cells_area();
  if (columns() == 0 || experts() == 0) {
    p.setPen(muted);
    p.drawText(rect(), Qt::AlignCenter, tr("No expert load stored yet"));
    return;
  }
  for (int c = 0; c < columns(); ++c)
    for (int x = 0; x < experts(); ++x) p.fillRect(cell_rect(c, x), cell_color(c, x));
  p.setPen(border_color());
  p.setBrush(Qt::NoBrush);
  p.drawRect(a.adjusted(0, 0, -1, -1));

  // Expert names: every one when they fit, else every k-th.
  const int line = QFontMetrics(font).height();
  const double row = static_cast<double>(a.height()) / experts();
  const int every = std::max(1, static_cast<int>(std::ceil(line / std::max(1.0, row))));
  p.setPen(muted);
  for (int x = 0; x < experts(); x += every) {
    const QRect r = cell_rect(0, x);
    p.drawText(QRect(0, r.top(), kLabelWidth - 6, r.height()).adjusted(0, -line, 0, line), Qt::AlignRight | Qt::AlignVCenter,
               tr("e%1").arg(x));
  }

  // Max/mean per step: 1 (even) at the bottom line of the strip.
  const QRect s = strip_area();
  double top = 2;
  for (const store::ExpertLoadColumn& c : map_->columns) top = std::max(top, c.imbalance);
  top = std::ceil(top);
  auto y_of = [&](double v) { return s.bottom() - (v - 1) / (top - 1) * s.height(); };
  p.setPen(QPen(border_color(), 1, Qt::DashLine));
  p.drawLine(QPointF(s.left(), y_of(1)), QPointF(s.right(), y_of(1)));
  QPainterPath path;
  for (int c = 0; c < columns(); ++c) {
    const QRect r = cell_rect(c, 0);
    const QPointF pt(r.center().x() + 0.5, y_of(std::max(1.0, map_->columns[static_cast<size_t>(c)].imbalance)));
    if (c == 0) path.moveTo(pt);
    else path.lineTo(pt);
  }
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(QPen(expert_color(dark), 1.6));
  p.drawPath(path);
  p.setRenderHint(QPainter::Antialiasing, false);
  p.setPen(muted);
  p.drawText(QRect(0, s.top() - line / 2, kLabelWidth - 6, line), Qt::AlignRight | Qt::AlignVCenter, QString::number(top, 'f', 0) + QStringLiteral("×"));
  p.drawText(QRect(0, s.bottom() - line / 2, kLabelWidth - 6, line), Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("1×"));
  p.drawText(QRect(s.right() + 6, s.top(), kLegendWidth - 6, s.height()), Qt::AlignLeft | Qt::AlignVCenter, tr("max/mean"));
  // Steps under the strip: first and last.
  const QRect axis(a.left(), s.bottom() + 3, a.width(), kAxisHeight);
  p.drawText(axis, Qt::AlignLeft | Qt::AlignTop, tr("step %1").arg(map_->columns.front().first_step));
  p.drawText(axis, Qt::AlignRight | Qt::AlignTop, tr("step %1").arg(map_->columns.back().last_step));

  // Legend: the colour scale, 4x at the top, 1/4x at the bottom.
  const QRect bar(a.right() + 10, a.top() + line / 2, 10, std::max(20, a.height() - line));
  QLinearGradient g(bar.topLeft(), bar.bottomLeft());
  for (int i = 0; i <= 8; ++i) {
    const double l = kRatioClamp - i * kRatioClamp / 4;
    g.setColorAt(i / 8.0, ratio_color(std::exp2(l), dark));
  }
  p.fillRect(bar, g);
  p.setPen(border_color());
  p.drawRect(bar.adjusted(0, 0, -1, -1));
  p.setPen(muted);
  const struct { double l; const char* text; } ticks[] = {{2, "4×"}, {1, "2×"}, {0, "mean"}, {-1, "½×"}, {-2, "¼×"}};
  for (const auto& t : ticks) {
    const int y = bar.top() + static_cast<int>((kRatioClamp - t.l) / (2 * kRatioClamp) * bar.height());
    p.drawText(QRect(bar.right() + 4, y - line / 2, kLegendWidth - 24, line), Qt::AlignLeft | Qt::AlignVCenter,
               QString::fromUtf8(t.text));
  }
}

}  // namespace meshwork::ui
