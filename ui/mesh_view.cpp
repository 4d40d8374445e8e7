#include "ui/mesh_view.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
constexpr double kLegendHeight = 54;
constexpr double kMaxCellW = 92, kMaxCellH = 64;

// Black or white text, whichever reads better on `bg` (relative luminance, sRGB weights).
QColor text_on(const QColor& bg) {
  const double l = 0.2126 * bg.redF() + 0.7152 * bg.greenF() + 0.0722 * bg.blueF();
  return l > 0.55 ? QColor("#111418") : QColor("#ffffff");
}
}  // namespace

MeshView::MeshView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setObjectName("MeshView");
}

void MeshView::set_mesh(const std::optional<DeviceMesh>& mesh, std::vector<bool> fast_links,
                        QStringList node_names) {
  mesh_ = mesh;
  fast_links_ = std::move(fast_links);
  node_names_ = std::move(node_names);
  if (mesh_ && selected_ >= mesh_->world_size()) selected_ = -1;
  hovered_ = -1;
  recompute_groups();
  relayout();
  update();
}

void MeshView::set_invalid_text(const QString& text) {
  invalid_text_ = text;
  update();
}

void MeshView::set_group_kind(GroupKind kind) {
  if (kind == kind_) return;
  kind_ = kind;
  recompute_groups();
  update();
  Q_EMIT group_kind_changed(kind);
}

void MeshView::set_selected_rank(int rank) {
  selected_ = rank;
  update();
  Q_EMIT selection_changed(rank);
}

void MeshView::recompute_groups() {
  group_index_.clear();
  slow_tp_.clear();
  group_count_ = 0;
  any_slow_ = any_cross_node_ = false;
  if (!mesh_) return;
  const int n = mesh_->world_size();
  group_index_.resize(static_cast<size_t>(n));
  slow_tp_.assign(static_cast<size_t>(n), 0);
  group_count_ = n / std::max(1, mesh_->shape().group_size(kind_));
  for (int r = 0; r < n; ++r) group_index_[static_cast<size_t>(r)] = mesh_->group_index(r, kind_);
  if (mesh_->shape()[Axis::tp] > 1) {
    for (int r = 0; r < n; ++r) {
      const bool crosses = mesh_->group_crosses_nodes(r, GroupKind::tp);
      const int node = mesh_->node_of(r);
      const bool slow_node = node < static_cast<int>(fast_links_.size()) &&
                             !fast_links_[static_cast<size_t>(node)];
      slow_tp_[static_cast<size_t>(r)] = crosses || slow_node;
      any_cross_node_ |= crosses;
      any_slow_ |= crosses || slow_node;
    }
  }
}

void MeshView::relayout() {
  layout_ = Layout{};
  if (!mesh_) return;
  const int nodes = mesh_->num_nodes();
  const int per_node = mesh_->gpus_per_node();
  const QRectF area = QRectF(rect()).adjusted(12, 10, -12, -(kLegendHeight + 6));
  Layout best;
  double best_size = -1;
  // Cells per row inside a node: up to 8 (a DGX row); more ranks wrap to further rows.
  const int cell_cols = std::min(per_node, 8);
  const int cell_rows = (per_node + cell_cols - 1) / cell_cols;
  for (int cols = 1; cols <= nodes; ++cols) {
    const int rows = (nodes + cols - 1) / cols;
    Layout l;
    l.node_cols = cols;
    l.cell_cols = cell_cols;
    l.cell_rows = cell_rows;
    const double gap = 10;
    l.node_w = (area.width() - gap * (cols - 1)) / cols;
    l.node_h = (area.height() - gap * (rows - 1)) / rows;
    l.pad = l.node_w > 120 ? 6 : 3;
    l.header = l.node_h > 60 ? 18 : 0;
    l.cell_w = std::min(kMaxCellW, (l.node_w - 2 * l.pad - 2 * (cell_cols - 1)) / cell_cols);
    l.cell_h = std::min(kMaxCellH, (l.node_h - l.header - 2 * l.pad - 2 * (cell_rows - 1)) / cell_rows);
    if (l.cell_w <= 2 || l.cell_h <= 2) continue;
    // Prefer the layout whose cells are largest in their smaller dimension (readable numbers),
    // with a mild preference for cells wider than tall.
    // Any layout that can print the coordinates beats one that cannot, then one with numbers.
    double size = std::min(l.cell_w, l.cell_h * 1.3);
    if (l.cell_w >= 54 && l.cell_h >= 34) size += 1000;
    else if (l.cell_w >= 16 && l.cell_h >= 12) size += 500;
    if (size > best_size) {
      best_size = size;
      best = l;
    }
  }
  if (best_size < 0) return;
  // Shrink node boxes to their cells and centre the grid.
  const int rows = (nodes + best.node_cols - 1) / best.node_cols;
  best.node_w = best.cell_cols * best.cell_w + 2 * (best.cell_cols - 1) + 2 * best.pad;
  best.node_h = best.header + best.cell_rows * best.cell_h + 2 * (best.cell_rows - 1) + 2 * best.pad;
  const double gap = 10;
  const double gw = best.node_cols * best.node_w + gap * (best.node_cols - 1);
  const double gh = rows * best.node_h + gap * (rows - 1);
  best.grid = QRectF(area.left() + (area.width() - gw) / 2, area.top() + (area.height() - gh) / 2, gw, gh);
  layout_ = best;
}

QRectF MeshView::node_rect(int node) const {
  const int col = node % layout_.node_cols, row = node / layout_.node_cols;
  return QRectF(layout_.grid.left() + col * (layout_.node_w + 10),
                layout_.grid.top() + row * (layout_.node_h + 10), layout_.node_w, layout_.node_h);
}

QRectF MeshView::cell_rect(int rank) const {
  if (!mesh_ || rank < 0 || rank >= mesh_->world_size() || layout_.cell_w <= 0) return {};
  const QRectF n = node_rect(mesh_->node_of(rank));
  const int local = mesh_->local_rank_of(rank);
  const int cx = local % layout_.cell_cols, cy = local / layout_.cell_cols;
  return QRectF(n.left() + layout_.pad + cx * (layout_.cell_w + 2),
                n.top() + layout_.header + layout_.pad + cy * (layout_.cell_h + 2), layout_.cell_w,
                layout_.cell_h);
}

int MeshView::rank_at(QPointF pos) const {
  if (!mesh_ || layout_.cell_w <= 0) return -1;
  for (int node = 0; node < mesh_->num_nodes(); ++node) {
    if (!node_rect(node).contains(pos)) continue;
    for (int l = 0; l < mesh_->gpus_per_node(); ++l) {
      const int r = node * mesh_->gpus_per_node() + l;
      if (r < mesh_->world_size() && cell_rect(r).adjusted(-1, -1, 1, 1).contains(pos)) return r;
    }
  }
  return -1;
}

QColor MeshView::cell_fill(int rank) const {
  const bool dark = is_dark();
  if (!mesh_ || rank < 0 || rank >= mesh_->world_size()) return {};
  if (group_count_ == mesh_->world_size())  // groups of one: nothing to tell apart
    return dark ? QColor("#3a3f45") : QColor("#e4e7eb");
  return group_shade(kind_, group_index_[static_cast<size_t>(rank)], group_count_, dark);
}

bool MeshView::rank_marked_slow(int rank) const {
  return rank >= 0 && rank < static_cast<int>(slow_tp_.size()) && slow_tp_[static_cast<size_t>(rank)];
}

void MeshView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const bool dark = is_dark();
  p.fillRect(rect(), palette().color(QPalette::Base));
  if (!mesh_ || layout_.cell_w <= 0) {
    p.setPen(muted_text_color());
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 1.1);
    p.setFont(f);
    p.drawText(rect().adjusted(24, 24, -24, -24), Qt::AlignCenter | Qt::TextWordWrap,
               invalid_text_.isEmpty() ? tr("No valid mesh to draw.") : invalid_text_);
    return;
  }
  const int n = mesh_->world_size();
  // Node boxes.
  QFont small = font();
  small.setPointSizeF(std::max(6.5, font().pointSizeF() * 0.8));
  for (int node = 0; node < mesh_->num_nodes(); ++node) {
    const QRectF r = node_rect(node);
    p.setPen(QPen(border_color(), 1));
    p.setBrush(card_color());
    p.drawRoundedRect(r, 5, 5);
    if (layout_.header > 0) {
      p.setFont(small);
      p.setPen(muted_text_color());
      QString label = tr("node %1").arg(node);
      if (node < node_names_.size() && !node_names_[node].isEmpty())
        label += QStringLiteral(" · ") + node_names_[node];
      const QRectF hr(r.left() + layout_.pad + 1, r.top() + 2, r.width() - 2 * layout_.pad, layout_.header);
      p.drawText(hr, Qt::AlignLeft | Qt::AlignVCenter,
                 p.fontMetrics().elidedText(label, Qt::ElideRight, static_cast<int>(hr.width())));
    }
  }
  // Cells.
  QFont rank_font = font();
  rank_font.setBold(true);
  const bool show_rank = layout_.cell_w >= 16 && layout_.cell_h >= 12;
  const bool show_coords = layout_.cell_w >= 54 && layout_.cell_h >= 34;
  rank_font.setPointSizeF(std::clamp(layout_.cell_h * 0.28, 6.0, font().pointSizeF() * 1.1));
  std::vector<int> hovered_groups[4];
  for (int r = 0; r < n; ++r) {
    const QRectF c = cell_rect(r);
    const QColor fill = cell_fill(r);
    p.setPen(Qt::NoPen);
    p.setBrush(fill);
    p.drawRoundedRect(c, 3, 3);
    if (show_rank) {
      p.setPen(text_on(fill));
      p.setFont(rank_font);
      if (show_coords) {
        p.drawText(c.adjusted(0, 2, 0, -c.height() * 0.45), Qt::AlignCenter, QString::number(r));
        p.setFont(small);
        p.drawText(c.adjusted(0, c.height() * 0.5, 0, -2), Qt::AlignCenter,
                   format_coord(mesh_->coord_of(r)));
      } else {
        p.drawText(c, Qt::AlignCenter, QString::number(r));
      }
    }
    if (rank_marked_slow(r)) {
      // A dashed red frame and a corner notch: "this tp group is slow".
      p.setBrush(Qt::NoBrush);
      p.setPen(QPen(error_color(), 1.6, Qt::DashLine));
      p.drawRoundedRect(c.adjusted(1, 1, -1, -1), 3, 3);
      QPainterPath tri;
      const double s = std::min(c.width(), c.height()) * 0.28;
      tri.moveTo(c.topRight());
      tri.lineTo(c.topRight() + QPointF(-s, 0));
      tri.lineTo(c.topRight() + QPointF(0, s));
      tri.closeSubpath();
      p.fillPath(tri, error_color());
    }
  }
  // Groups of the hovered (else the selected) rank, one outline per axis in its colour, nested
  // so all four stay visible.
  const int focus = hovered_ >= 0 ? hovered_ : selected_;
  if (focus >= 0 && focus < n) {
    int inset = 0;
    for (Axis a : kAxes) {
      const GroupKind g = group_of_axis(a);
      if (mesh_->shape().group_size(g) <= 1) continue;
      p.setBrush(Qt::NoBrush);
      const double d = -1.5 + 3.0 * inset;  // outer outline first
      const auto members = mesh_->group_members(focus, g);
      // A halo in the background colour under each outline keeps it visible on a cell filled
      // with the same hue (tp outlines on tp-coloured cells).
      p.setPen(QPen(palette().color(QPalette::Base), 4.2));
      for (int m : members) p.drawRoundedRect(cell_rect(m).adjusted(d, d, -d, -d), 3, 3);
      p.setPen(QPen(axis_color(a, dark), 2.2));
      for (int m : members) p.drawRoundedRect(cell_rect(m).adjusted(d, d, -d, -d), 3, 3);
      ++inset;
    }
    p.setPen(QPen(palette().color(QPalette::Text), 2.5));
    p.drawRoundedRect(cell_rect(focus).adjusted(-3, -3, 3, 3), 4, 4);
  }
  if (selected_ >= 0 && selected_ < n && selected_ != focus) {
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(palette().color(QPalette::Highlight), 2.5));
    p.drawRoundedRect(cell_rect(selected_).adjusted(-3, -3, 3, 3), 4, 4);
  }
  paint_legend(p, QRectF(0, height() - kLegendHeight, width(), kLegendHeight));
}

void MeshView::paint_legend(QPainter& p, const QRectF& area) {
  const bool dark = is_dark();
  p.setPen(QPen(border_color(), 1));
  p.drawLine(area.topLeft(), area.topRight());
  const QFontMetricsF fm(font());
  double x = area.left() + 14;
  const double y1 = area.top() + 8, line = fm.height() + 6;
  p.setFont(font());
  // Line 1: the coloured kind, its shades and a count.
  const int gsize = mesh_->shape().group_size(kind_);
  const int shades = std::min(group_count_, 4);
  for (int i = 0; i < std::max(1, shades); ++i) {
    p.setPen(Qt::NoPen);
    p.setBrush(gsize > 1 ? group_shade(kind_, i, group_count_, dark) : cell_fill(0));
    p.drawRoundedRect(QRectF(x, y1 + 2, 14, fm.height() - 4), 2, 2);
    x += 16;
  }
  x += 6;
  QString text;
  if (gsize <= 1)
    text = tr("%1 = 1: each rank is its own group").arg(group_label(kind_));
  else
    text = tr("%1 · %2 groups of %3 ranks (shades tell neighbouring groups apart)")
               .arg(group_label(kind_))
               .arg(group_count_)
               .arg(gsize);
  p.setPen(palette().color(QPalette::Text));
  p.drawText(QPointF(x, y1 + fm.ascent()), text);
  // Line 2: hover key and warnings.
  x = area.left() + 14;
  const double y2 = y1 + line;
  p.setPen(muted_text_color());
  const QString hover = tr("Hover a rank: its groups are outlined");
  p.drawText(QPointF(x, y2 + fm.ascent()), hover);
  x += fm.horizontalAdvance(hover) + 10;
  for (Axis a : kAxes) {
    p.setPen(QPen(axis_color(a, dark), 2.2));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(QRectF(x, y2 + 3, 12, fm.height() - 6), 2, 2);
    x += 16;
    const QString name = axis_label(a);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QPointF(x, y2 + fm.ascent()), name);
    x += fm.horizontalAdvance(name) + 12;
  }
  if (any_slow_) {
    x += 8;
    p.setPen(QPen(error_color(), 1.6, Qt::DashLine));
    p.drawRoundedRect(QRectF(x, y2 + 3, 12, fm.height() - 6), 2, 2);
    x += 18;
    p.setPen(error_color());
    p.drawText(QPointF(x, y2 + fm.ascent()),
               any_cross_node_ ? tr("tp group crosses nodes") : tr("tp group over PCIe only"));
  }
}

void MeshView::resizeEvent(QResizeEvent*) { relayout(); }

void MeshView::set_hovered(int rank) {
  if (rank == hovered_) return;
  hovered_ = rank;
  update();
  Q_EMIT rank_hovered(rank);
}

void MeshView::mouseMoveEvent(QMouseEvent* e) { set_hovered(rank_at(e->position())); }

void MeshView::mousePressEvent(QMouseEvent* e) {
  const int r = rank_at(e->position());
  if (r < 0) return;
  selected_ = r;
  update();
  Q_EMIT rank_clicked(r);
  Q_EMIT selection_changed(r);
}

void MeshView::leaveEvent(QEvent*) { set_hovered(-1); }

void MeshView::keyPressEvent(QKeyEvent* e) {
  if (!mesh_) return QWidget::keyPressEvent(e);
  const int n = mesh_->world_size();
  int r = selected_ < 0 ? 0 : selected_;
  switch (e->key()) {
    case Qt::Key_Left: r = std::max(0, r - 1); break;
    case Qt::Key_Right: r = std::min(n - 1, r + 1); break;
    case Qt::Key_Up: r = std::max(0, r - layout_.cell_cols); break;  // a row of cells inside a node
    case Qt::Key_Down: r = std::min(n - 1, r + layout_.cell_cols); break;
    case Qt::Key_PageUp: r = std::max(0, r - mesh_->gpus_per_node()); break;  // previous node
    case Qt::Key_PageDown: r = std::min(n - 1, r + mesh_->gpus_per_node()); break;
    case Qt::Key_Escape: set_selected_rank(-1); return;
    default: return QWidget::keyPressEvent(e);
  }
  set_selected_rank(r);
}

bool MeshView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && mesh_) {
    auto* he = static_cast<QHelpEvent*>(e);
    const int r = rank_at(he->pos());
    if (r < 0) {
      QToolTip::hideText();
      return true;
    }
    const MeshCoord c = mesh_->coord_of(r);
    QString tip = tr("<b>rank %1</b> on node %2 (local %3)<br>%4")
                      .arg(r).arg(mesh_->node_of(r)).arg(mesh_->local_rank_of(r)).arg(format_coord_named(c));
    if (rank_marked_slow(r))
      tip += tr("<br><span style='color:%1'>its tp group crosses nodes or slow links</span>")
                 .arg(error_color().name());
    QToolTip::showText(he->globalPos(), tip, this);
    return true;
  }
  return QWidget::event(e);
}

}  // namespace meshwork::ui
