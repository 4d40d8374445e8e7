#include "ui/axis_colors.h"

#include <QPainter>
#include <array>

namespace meshwork::ui {

namespace {
struct Pair {
  const char* light;
  const char* dark;
};
// Okabe-Ito: blue, bluish green, reddish purple, vermillion for the four axes; sky blue, orange and
// a neutral grey-violet for the flattened groups, which are unions of axes.
// pp, the outermost axis, takes Okabe-Ito's yellow, darkened on light backgrounds to stay legible;
// so do sky blue and orange, which on white would fall under 3:1.
constexpr std::array<Pair, 8> kGroupColors = {{
    {"#0072B2", "#4AA8E8"},  // dp_replicate
    {"#009E73", "#3CCB9F"},  // dp_shard
    {"#CC79A7", "#E6A0C8"},  // cp
    {"#D55E00", "#FF8A3D"},  // tp
    {"#3A93CC", "#7FCBF5"},  // dp
    {"#C27C00", "#F5B940"},  // dp_shard_cp
    {"#7A6FA8", "#A99ED6"},  // dp_cp
    {"#A68A00", "#F0E442"},  // pp
}};
static_assert(kGroupColors.size() == kGroupKinds.size(), "one colour per group kind");
}  // namespace

QColor group_color(GroupKind kind, bool dark) {
  const Pair& p = kGroupColors[static_cast<size_t>(kind)];
  return QColor(dark ? p.dark : p.light);
}

QColor group_shade(GroupKind kind, int index, int count, bool dark) {
  // Four lightness steps in a fixed order: full hue, pale, mid, deep. Adjacent groups never share
  // a step, and with <= 4 groups every group has its own shade.
  const QColor base = group_color(kind, dark);
  static constexpr std::array<int, 4> kLighter = {100, 155, 125, 80};
  const int step = count <= 1 ? 0 : index % 4;
  const int f = kLighter[static_cast<size_t>(step)];
  return f >= 100 ? base.lighter(f) : base.darker(100 * 100 / f);
}

QColor expert_color(bool dark) { return QColor(dark ? "#E17AA0" : "#882255"); }

QColor memory_term_color(int term_index, bool dark) {
  // params, grads, optimizer, activations, buffers, reserve: cool-to-warm greys and slates so the
  // bar reads as one quantity split in parts; the axis hues stay reserved for axes.
  static constexpr std::array<Pair, 6> kTerms = {{
      {"#4A5568", "#8C9AB0"},  // params: slate
      {"#718096", "#A3AFC2"},  // grads
      {"#A0AEC0", "#C3CCD8"},  // optimizer
      {"#8C7B6B", "#B5A594"},  // activations: taupe
      {"#B8B1A8", "#857E76"},  // buffers
      {"#DAD7D2", "#5E5A55"},  // reserve
  }};
  const Pair& p = kTerms[static_cast<size_t>(term_index) % kTerms.size()];
  return QColor(dark ? p.dark : p.light);
}

QColor run_color(int index, bool dark) {
  // Crimson, teal, indigo, brown, magenta, olive, slate, khaki, forest, purple: away from the
  // Okabe-Ito axis hues above in hue or lightness, darker on white and lighter on dark cards.
  static constexpr std::array<Pair, kRunColorCount> kRuns = {{
      {"#C23B4B", "#F0707E"},
      {"#1F7F86", "#5CC4CC"},
      {"#4453B8", "#8593F0"},
      {"#8C5A3C", "#C99A78"},
      {"#A8329A", "#E27BD3"},
      {"#5B7A1E", "#A4C45A"},
      {"#5F6B7A", "#AAB4C2"},
      {"#857A50", "#CFC59A"},
      {"#2E5E3E", "#7FB88E"},
      {"#7B3FA0", "#C18BE6"},
  }};
  const Pair& p = kRuns[static_cast<size_t>(((index % kRunColorCount) + kRunColorCount) % kRunColorCount)];
  return QColor(dark ? p.dark : p.light);
}

QColor metric_color(MetricSeries series, bool dark) {
  // Clear of the axis hues, which only ever mean an axis.
  switch (series) {
    case MetricSeries::ink: return dark ? QColor("#e5e7eb") : QColor("#1f2937");
    case MetricSeries::lr: return dark ? QColor("#c9a96e") : QColor("#8c6d31");
    case MetricSeries::grad_norm: return dark ? QColor("#9fb0c4") : QColor("#4b5d73");
    case MetricSeries::mfu: return dark ? QColor("#b59ac4") : QColor("#7d5a91");
    case MetricSeries::compute: return dark ? QColor("#7d8594") : QColor("#858d9a");
  }
  return {};
}

QColor rank_color(int r, int n, bool dark) {
  const double t = n <= 1 ? 0.0 : static_cast<double>(r) / (n - 1);
  const QColor a = dark ? QColor("#93a4ba") : QColor("#334155");
  const QColor b = dark ? QColor("#e8c468") : QColor("#b45309");
  return QColor::fromRgbF(a.redF() + t * (b.redF() - a.redF()), a.greenF() + t * (b.greenF() - a.greenF()),
                          a.blueF() + t * (b.blueF() - a.blueF()));
}

QString group_label(GroupKind kind) {
  switch (kind) {
    case GroupKind::dp: return QStringLiteral("dp (replicate × shard)");
    case GroupKind::dp_shard_cp: return QStringLiteral("dp_shard_cp (shard × cp)");
    case GroupKind::dp_cp: return QStringLiteral("dp_cp (replicate × shard × cp)");
    default: return QString::fromUtf8(group_name(kind).data(), static_cast<int>(group_name(kind).size()));
  }
}

QPixmap color_swatch(const QColor& color) {
  QPixmap px(12, 12);
  px.fill(Qt::transparent);
  QPainter p(&px);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(Qt::NoPen);
  p.setBrush(color);
  p.drawRoundedRect(QRectF(0, 0, 12, 12), 3, 3);
  return px;
}

}  // namespace meshwork::ui
