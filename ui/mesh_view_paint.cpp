// MeshView's painting: what is on screen at the current zoom, at the detail the zoom allows.
// Every loop here runs over the node boxes that meet the drawing area (MeshGeometry::span), so a
// paint costs what the window holds, not what the mesh holds.
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/mesh_view.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
constexpr double kLegendHeight = 54;

QColor text_on(const QColor& bg) {  // black or white, whichever reads better (sRGB luminance)
  const double l = 0.2126 * bg.redF() + 0.7152 * bg.greenF() + 0.0722 * bg.blueF();
  return l > 0.55 ? QColor("#111418") : QColor("#ffffff");
}

// Visits the nodes of span `s` (row-major) that exist.
template <typename F>
void for_nodes(const MeshGeometry& g, const MeshGeometry::Span& s, F&& f) {
  for (int row = s.row0; row <= s.row1; ++row)
    for (int col = s.col0; col <= s.col1; ++col)
      if (const int node = row * g.node_cols + col; node < g.nodes) f(node);
}
}  // namespace

void MeshView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Base));
  painted_ = 0;
  if (!mesh_ || !geo_.valid()) {
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(muted_text_color());
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 1.1);
    p.setFont(f);
    p.drawText(rect().adjusted(24, 24, -24, -24), Qt::AlignCenter | Qt::TextWordWrap,
               invalid_text_.isEmpty() ? tr("No valid mesh to draw.") : invalid_text_);
    return;
  }
  const QRectF area = draw_area();
  // The world rectangle on screen, one pixel larger so partly visible boxes are drawn too.
  const QPointF w0 = to_world(area.topLeft() - QPointF(1, 1)), w1 = to_world(area.bottomRight() + QPointF(1, 1));
  const MeshGeometry::Span span = geo_.span(QRectF(w0, w1));
  p.save();
  p.setClipRect(area.adjusted(-8, -8, 8, 8));
  switch (detail()) {
    case Detail::ranks: paint_ranks(p, span); break;
    case Detail::nodes: paint_nodes(p, span); break;
    case Detail::blocks: paint_blocks(p, span); break;
  }
  p.restore();
  paint_legend(p, QRectF(0, height() - kLegendHeight, width(), kLegendHeight));
}

void MeshView::paint_ranks(QPainter& p, const MeshGeometry::Span& span) {
  p.setRenderHint(QPainter::Antialiasing);
  const bool dark = is_dark();
  const QRectF area = draw_area();
  const int n = mesh_->world_size(), per_node = mesh_->gpus_per_node();
  const double cw = geo_.cell_w * zoom_, ch = geo_.cell_h * zoom_, header = geo_.header * zoom_;
  // Cells that touch in the dense layout get a pixel of air on screen.
  const double inset = geo_.dense ? std::min(1.0, cw * 0.08) : 0;
  QFont small = font();
  small.setPointSizeF(std::max(6.5, font().pointSizeF() * 0.8));
  QFont rank_font = font();
  rank_font.setBold(true);
  rank_font.setPointSizeF(std::clamp(ch * 0.28, 6.0, font().pointSizeF() * 1.1));
  const bool show_rank = cw >= 16 && ch >= 12;
  const bool show_coords = cw >= 54 && ch >= 34;
  const int ep = mesh_->shape().ep;
  for_nodes(geo_, span, [&](int node) {
    const QRectF r = node_rect(node);
    p.setPen(QPen(border_color(), 1));
    p.setBrush(card_color());
    p.drawRoundedRect(r, 5, 5);
    ++painted_;
    // The node's name: in its header, or (dense layout, zoomed in) in the gap above its box.
    const double gap = geo_.gap * zoom_;
    if (header >= 12 || (geo_.dense && gap >= 12)) {
      p.setFont(small);
      p.setPen(muted_text_color());
      QString label = tr("node %1").arg(node);
      if (node < node_names_.size() && !node_names_[node].isEmpty())
        label += QStringLiteral(" · ") + node_names_[node];
      if (stages() > 1) {
        const int s0 = stage_of(mesh_->rank_on_node(node, 0));
        const int s1 = stage_of(std::min(n - 1, mesh_->rank_on_node(node, per_node - 1)));
        label += s0 == s1 ? tr(" · stage %1").arg(s0) : tr(" · stages %1–%2").arg(s0).arg(s1);
      }
      const double pad = geo_.pad * zoom_;
      const QRectF hr = header >= 12 ? QRectF(r.left() + pad + 1, r.top() + 2, r.width() - 2 * pad, header)
                                     : QRectF(r.left() + 2, r.top() - std::min(gap, 22.0), r.width() - 4, std::min(gap, 22.0));
      p.drawText(hr, Qt::AlignLeft | (header >= 12 ? Qt::AlignVCenter : Qt::AlignBottom),
                 p.fontMetrics().elidedText(label, Qt::ElideRight, static_cast<int>(hr.width())));
    }
    for (int local = 0; local < per_node; ++local) {
      const int rank = mesh_->rank_on_node(node, local);
      if (rank >= n) break;
      const QRectF c = cell_rect(rank).adjusted(inset, inset, -inset, -inset);
      if (!c.intersects(area)) continue;
      const QColor fill = cell_fill(rank);
      p.setPen(Qt::NoPen);
      p.setBrush(fill);
      p.drawRoundedRect(c, 3, 3);
      ++painted_;
      if (show_rank) {
        p.setPen(text_on(fill));
        p.setFont(rank_font);
        if (show_coords) {
          p.drawText(c.adjusted(0, 2, 0, -c.height() * 0.45), Qt::AlignCenter, QString::number(rank));
          p.setFont(small);
          p.drawText(c.adjusted(0, c.height() * 0.5, 0, -2), Qt::AlignCenter, format_coord(mesh_->coord_of(rank)));
        } else {
          p.drawText(c, Qt::AlignCenter, QString::number(rank));
        }
      }
      if (rank_health(rank) == RankHealth::culprit) {
        // The rank the others wait for: a thick frame in the text colour, seen in both themes.
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(palette().color(QPalette::WindowText), 3.0));
        p.drawRoundedRect(c.adjusted(1.5, 1.5, -1.5, -1.5), 3, 3);
      }
      if (rank_marked_slow(rank)) {
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
      if (ep > 1) {
        // Expert parallel: a bar under the cells of each ep group (consecutive ranks, core/mesh.h),
        // rounded off at the group's ends, neighbouring groups in alternating tints, so the
        // borrowed groups read over the axes' fills.
        const int e = mesh_->expert_group_rank(rank, ExpertGroupKind::ep);
        const bool odd_group = (rank / ep) % 2 == 1;
        const double bar = std::clamp(c.height() * 0.14, 3.0, 6.0);
        const double l = e == 0 ? c.left() + 3 : cell_rect(rank).left();
        const double rr = e == ep - 1 ? c.right() - 3 : cell_rect(rank).right();
        p.setPen(Qt::NoPen);
        p.setBrush(odd_group ? expert_color(dark).lighter(dark ? 125 : 170) : expert_color(dark));
        p.drawRoundedRect(QRectF(l, c.bottom() - bar - 1, rr - l, bar), bar / 2, bar / 2);
      }
    }
  });
  if (stages() > 1) paint_stages(p, span, /*cells=*/true);
  // Groups of the hovered (else the selected) rank, one outline per axis in its colour, nested
  // so all four stay visible. Only members on screen are drawn.
  const int focus_rank = hovered_ >= 0 ? hovered_ : selected_;
  if (focus_rank >= 0 && focus_rank < n) {
    const Focus& f = focus(focus_rank);
    int nest = 0;
    for (Axis a : kAxes) {
      const auto& members = f.members[static_cast<size_t>(a)];
      if (members.empty()) continue;
      p.setBrush(Qt::NoBrush);
      const double d = -1.5 + 3.0 * nest;  // outer outline first
      // A halo in the background colour under each outline keeps it visible on a cell filled
      // with the same hue (tp outlines on tp-coloured cells).
      for (const auto& [width, color] : {std::pair{4.2, palette().color(QPalette::Base)}, std::pair{2.2, axis_color(a, dark)}}) {
        p.setPen(QPen(color, width));
        for (int m : members)
          if (const QRectF c = cell_rect(m); c.intersects(area)) p.drawRoundedRect(c.adjusted(d, d, -d, -d), 3, 3);
      }
      ++nest;
    }
    if (!f.ep_members.empty()) {
      // The focus rank's ep group: a dashed outline in ep's colour, outside the axes' outlines.
      const double d = -1.5 + 3.0 * nest;
      p.setBrush(Qt::NoBrush);
      p.setPen(QPen(expert_color(dark), 2.2, Qt::DashLine));
      for (int m : f.ep_members)
        if (const QRectF c = cell_rect(m); c.intersects(area)) p.drawRoundedRect(c.adjusted(d, d, -d, -d), 3, 3);
    }
    p.setPen(QPen(palette().color(QPalette::Text), 2.5));
    p.drawRoundedRect(cell_rect(focus_rank).adjusted(-3, -3, 3, 3), 4, 4);
  }
  if (selected_ >= 0 && selected_ < n && selected_ != focus_rank) {
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(palette().color(QPalette::Highlight), 2.5));
    p.drawRoundedRect(cell_rect(selected_).adjusted(-3, -3, 3, 3), 4, 4);
  }
}

void MeshView::paint_nodes(QPainter& p, const MeshGeometry::Span& span) {
  // Crisp fills, no antialiasing: thousands of small rectangles.
  p.setRenderHint(QPainter::Antialiasing, false);
  const bool dark = is_dark();
  const int n = mesh_->world_size(), per_node = mesh_->gpus_per_node();
  const bool pieces = pieces_visible();
  for_nodes(geo_, span, [&](int node) {
    const QRectF r = node_rect(node);
    p.fillRect(r, border_color());
    ++painted_;
    if (pieces) {
      // Each rank a stripe of its group's colour: the axis structure stays visible per node.
      for (int local = 0; local < per_node; ++local) {
        const int rank = mesh_->rank_on_node(node, local);
        if (rank >= n) break;
        p.fillRect(to_screen(geo_.piece_rect(node, local)).intersected(r), cell_fill(rank));
        ++painted_;
      }
    } else {
      p.fillRect(r.adjusted(0.5, 0.5, -0.5, -0.5), cell_fill(mesh_->rank_on_node(node, 0)));
    }
    if (slow_node_[static_cast<size_t>(node)]) {
      p.setPen(QPen(error_color(), 1.2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
    }
  });
  if (stages() > 1) paint_stages(p, span, /*cells=*/false);
  // The focus rank's groups, as the nodes that hold their members, one frame colour per axis.
  const int focus_rank = hovered_ >= 0 ? hovered_ : selected_;
  const MeshGeometry::Span& s = span;
  auto on_screen = [&](int node) {
    const int col = node % geo_.node_cols, row = node / geo_.node_cols;
    return col >= s.col0 && col <= s.col1 && row >= s.row0 && row <= s.row1;
  };
  p.setBrush(Qt::NoBrush);
  if (focus_rank >= 0 && focus_rank < n) {
    const Focus& f = focus(focus_rank);
    int nest = 0;
    for (Axis a : kAxes) {
      const auto& nodes = f.nodes[static_cast<size_t>(a)];
      if (nodes.empty()) continue;
      p.setPen(QPen(axis_color(a, dark), 1.5));
      const double d = -1.5 - 1.5 * (3 - nest);
      for (int node : nodes)
        if (on_screen(node)) p.drawRect(node_rect(node).adjusted(d, d, -d, -d));
      ++nest;
    }
    if (!f.ep_nodes.empty()) {
      p.setPen(QPen(expert_color(dark), 1.5, Qt::DashLine));
      const double d = -1.5 - 1.5 * (3 - nest);
      for (int node : f.ep_nodes)
        if (on_screen(node)) p.drawRect(node_rect(node).adjusted(d, d, -d, -d));
    }
  }
  const int focus_node = focus_rank >= 0 ? mesh_->node_of(focus_rank) : hovered_node_;
  if (focus_node >= 0) {
    p.setPen(QPen(palette().color(QPalette::Text), 2));
    p.drawRect(node_rect(focus_node).adjusted(-2, -2, 2, 2));
  }
  const int sel_node = selected_node_ >= 0 ? selected_node_ : (selected_ >= 0 ? mesh_->node_of(selected_) : -1);
  if (sel_node >= 0 && sel_node != focus_node) {
    p.setPen(QPen(palette().color(QPalette::Highlight), 2));
    p.drawRect(node_rect(sel_node).adjusted(-2, -2, 2, 2));
  }
}

void MeshView::paint_blocks(QPainter& p, const MeshGeometry::Span& span) {
  // Blocks of b x b nodes: one tile each, in the colour of the block's first rank.
  p.setRenderHint(QPainter::Antialiasing, false);
  const int b = block_side();
  for (int row = span.row0 / b * b; row <= span.row1; row += b) {
    for (int col = span.col0 / b * b; col <= span.col1; col += b) {
      const int first = row * geo_.node_cols + col;
      if (first >= geo_.nodes) continue;
      const int last_col = std::min(geo_.node_cols - 1, col + b - 1), last_row = std::min(geo_.node_rows - 1, row + b - 1);
      const QRectF tl = node_rect(first);
      const QRectF br = to_screen(geo_.node_rect(last_row * geo_.node_cols + last_col));
      p.fillRect(QRectF(tl.topLeft(), br.bottomRight()), cell_fill(mesh_->rank_on_node(first, 0)));
      ++painted_;
    }
  }
  if (hovered_node_ >= 0) {
    p.setPen(QPen(palette().color(QPalette::Text), 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(node_rect(hovered_node_).adjusted(-2, -2, 2, 2));
  }
}

void MeshView::paint_legend(QPainter& p, const QRectF& area) {
  p.setRenderHint(QPainter::Antialiasing);
  const bool dark = is_dark();
  p.setPen(QPen(border_color(), 1));
  p.drawLine(area.topLeft(), area.topRight());
  const QFontMetricsF fm(font());
  double x = area.left() + 14;
  const double y1 = area.top() + 8, line = fm.height() + 6;
  p.setFont(font());
  if (!health_.empty()) {
    // Showing states: the legend says what each fill means, with how many ranks have it.
    std::array<int, 5> count{};
    for (RankHealth h : health_) ++count[static_cast<size_t>(h)];
    for (RankHealth h : {RankHealth::computing, RankHealth::waiting, RankHealth::slow, RankHealth::culprit}) {
      if (count[static_cast<size_t>(h)] == 0 && h != RankHealth::computing) continue;
      p.setPen(Qt::NoPen);
      p.setBrush(rank_health_color(h, dark));
      p.drawRoundedRect(QRectF(x, y1 + 2, 14, fm.height() - 4), 2, 2);
      x += 18;
      const QString label = tr("%1 %2").arg(QString::fromLatin1(rank_health_name(h))).arg(count[static_cast<size_t>(h)]);
      p.setPen(palette().color(QPalette::Text));
      p.drawText(QPointF(x, y1 + fm.ascent()), label);
      x += fm.horizontalAdvance(label) + 14;
    }
    return;
  }
  // Line 1: the coloured kind, its shades and a count; on the right, the zoom.
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
  const double text_end = x + fm.horizontalAdvance(text);
  if (max_zoom() > 1.01) {
    QString zoom_text;
    switch (detail()) {
      case Detail::ranks: zoom_text = tr("%1× · wheel: zoom · drag: pan · 0: fit").arg(zoom_, 0, 'f', 1); break;
      case Detail::nodes:
        zoom_text = pieces_visible() ? tr("a tile per node, a stripe per rank · wheel: zoom in to ranks")
                                     : tr("a tile per node · wheel: zoom in to ranks");
        break;
      case Detail::blocks: zoom_text = tr("a tile per %1×%1 nodes · wheel: zoom in").arg(block_side()); break;
    }
    const double w = fm.horizontalAdvance(zoom_text);
    if (area.right() - 14 - w > text_end + 16) {
      p.setPen(muted_text_color());
      p.drawText(QPointF(area.right() - 14 - w, y1 + fm.ascent()), zoom_text);
    }
  }
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
  if (mesh_ && mesh_->shape().ep > 1) {
    // ep: a bar under its groups' cells and a dashed outline on hover (its own colour).
    p.setPen(Qt::NoPen);
    p.setBrush(expert_color(dark));
    p.drawRoundedRect(QRectF(x, y2 + fm.height() - 7, 12, 4), 2, 2);
    x += 16;
    const QString name = tr("ep %1").arg(mesh_->shape().ep);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QPointF(x, y2 + fm.ascent()), name);
    x += fm.horizontalAdvance(name) + 12;
  }
  if (stages() > 1) {
    x += 8;
    for (int st = 0; st < std::min(stages(), 4); ++st) {
      p.fillRect(QRectF(x, y2 + fm.height() - 7, 10, 4), stage_color(st));
      x += 12;
    }
    x += 4;
    const QString key = tr("stages 0 → %1 (bars under the ranks)").arg(stages() - 1);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QPointF(x, y2 + fm.ascent()), key);
    x += fm.horizontalAdvance(key) + 12;
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

QColor MeshView::stage_color(int stage) const {
  // The pp hue from dark to light along the pipeline, so the order reads off the bars too.
  const QColor base = axis_color(Axis::pp, is_dark());
  const int n = std::max(1, stages() - 1);
  const double light = 0.30 + 0.45 * static_cast<double>(stage) / n;
  return QColor::fromHslF(base.hslHueF(), std::max(0.45f, base.hslSaturationF()), light).toRgb();
}

void MeshView::paint_stages(QPainter& p, const MeshGeometry::Span& span, bool cells) {
  const int n = mesh_->world_size(), per_node = mesh_->gpus_per_node(), pp = stages();
  const QRectF area = draw_area();
  // Bars: under each cell, or along the bottom of each node tile (its ranks' stages, as stripes).
  for_nodes(geo_, span, [&](int node) {
    for (int local = 0; local < per_node; ++local) {
      const int rank = mesh_->rank_on_node(node, local);
      if (rank >= n) break;
      QRectF r = cells ? cell_rect(rank) : to_screen(geo_.piece_rect(node, local)).intersected(node_rect(node));
      if (!r.intersects(area)) continue;
      const double h = cells ? std::clamp(r.height() * 0.12, 2.0, 5.0) : std::clamp(r.height() * 0.15, 1.0, 4.0);
      p.fillRect(QRectF(r.left(), r.bottom() - h, r.width(), h), stage_color(stage_of(rank)));
    }
  });
  // Arrows: from the last rank of stage s to the first of stage s + 1 (cells), or between their
  // nodes (tiles), where either end is on screen.
  p.save();
  p.setRenderHint(QPainter::Antialiasing);
  const QColor ink = axis_color(Axis::pp, is_dark());
  const int per_stage = n / pp;
  for (int st = 0; st + 1 < pp; ++st) {
    const int from = (st + 1) * per_stage - 1, to = (st + 1) * per_stage;
    const QRectF a = cells ? cell_rect(from) : node_rect(mesh_->node_of(from));
    const QRectF b = cells ? cell_rect(to) : node_rect(mesh_->node_of(to));
    if (!a.intersects(area) && !b.intersects(area)) continue;
    if (!cells && mesh_->node_of(from) == mesh_->node_of(to)) continue;  // inside one tile
    const QPointF p0(a.center().x(), a.bottom() - 1), p1(b.center().x(), b.bottom() - 1);
    // A bow below the bars, so the arrow does not cover the ranks it joins.
    const double sag = std::clamp(QLineF(p0, p1).length() * 0.25, 8.0, 40.0);
    QPainterPath path(p0);
    path.cubicTo(p0 + QPointF(0, sag), p1 + QPointF(0, sag), p1);
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(palette().color(QPalette::Base), 4.0));
    p.drawPath(path);
    p.setPen(QPen(ink, 2.0));
    p.drawPath(path);
    // The head, pointing up into stage s + 1's first rank.
    QPainterPath head;
    head.moveTo(p1);
    head.lineTo(p1 + QPointF(-4.5, 7));
    head.lineTo(p1 + QPointF(4.5, 7));
    head.closeSubpath();
    p.fillPath(head, ink);
  }
  p.restore();
}

QString MeshView::tooltip_at(QPointF pos) const {
  if (!mesh_) return {};
  auto node_name = [&](int node) {
    return node < node_names_.size() && !node_names_[node].isEmpty() ? QStringLiteral(" (%1)").arg(node_names_[node]) : QString();
  };
  if (const int r = rank_at(pos); r >= 0) {
    const int node = mesh_->node_of(r);
    QString tip = tr("<b>rank %1</b> on node %2%3 (local %4)<br>%5")
                      .arg(r).arg(node).arg(node_name(node)).arg(mesh_->local_rank_of(r)).arg(format_coord_named(mesh_->coord_of(r)));
    if (stages() > 1)
      tip += tr("<br>pipeline stage %1 of %2 (0 holds the embedding, %3 the head)").arg(stage_of(r)).arg(stages()).arg(stages() - 1);
    if (rank_marked_slow(r))
      tip += tr("<br><span style='color:%1'>its tp group crosses nodes or slow links</span>").arg(error_color().name());
    if (!health_.empty()) tip += QStringLiteral("<br><b>%1</b>").arg(health_notes_[static_cast<size_t>(r)].toHtmlEscaped());
    return tip;
  }
  const int node = node_at(pos);
  if (node < 0) return {};
  if (detail() == Detail::blocks) {
    const int b = block_side();
    const int col = node % geo_.node_cols / b * b, row = node / geo_.node_cols / b * b;
    const int first = row * geo_.node_cols + col;
    return tr("<b>nodes %1–%2</b> and their neighbours below (a block of %3×%3 nodes)<br>zoom in to see them")
        .arg(first).arg(std::min(geo_.nodes - 1, first + b - 1)).arg(b);
  }
  // A node: its ranks and, per axis, the range of coordinates they cover (from core's coord_of).
  const int first = mesh_->rank_on_node(node, 0);
  const int last = std::min(mesh_->world_size(), mesh_->rank_on_node(node + 1, 0)) - 1;
  MeshCoord lo = mesh_->coord_of(first), hi = lo;
  for (int r = first + 1; r <= last; ++r) {
    const MeshCoord c = mesh_->coord_of(r);
    for (Axis a : kAxes) {
      lo.set(a, std::min(lo[a], c[a]));
      hi.set(a, std::max(hi[a], c[a]));
    }
  }
  QStringList axes;
  for (Axis a : kAxes)
    if (mesh_->shape()[a] > 1)
      axes << (lo[a] == hi[a] ? QStringLiteral("%1 %2").arg(axis_label(a)).arg(lo[a])
                              : QStringLiteral("%1 %2–%3").arg(axis_label(a)).arg(lo[a]).arg(hi[a]));
  return tr("<b>node %1</b>%2 · ranks %3–%4<br>%5").arg(node).arg(node_name(node)).arg(first).arg(last).arg(axes.join(", "));
}

}  // namespace meshwork::ui
