#include "ui/mesh_geometry.h"

#include <algorithm>
#include <cmath>

namespace meshwork::ui {

namespace {
// Fills node_w/h and cell_w/h for `cols` node columns and `cell_cols` cell columns in `area`;
// the spacing fields (gap, pad, header, cell_gap) must be set. False when cells have no room.
bool size_cells(MeshGeometry& g, int cols, int cell_cols, const QRectF& area, bool cap) {
  const int rows = (g.nodes + cols - 1) / cols;
  g.node_cols = cols;
  g.node_rows = rows;
  g.cell_cols = cell_cols;
  g.cell_rows = (g.per_node + cell_cols - 1) / cell_cols;
  g.node_w = (area.width() - g.gap * (cols - 1)) / cols;
  g.node_h = (area.height() - g.gap * (rows - 1)) / rows;
  g.cell_w = (g.node_w - 2 * g.pad - g.cell_gap * (cell_cols - 1)) / cell_cols;
  g.cell_h = (g.node_h - g.header - 2 * g.pad - g.cell_gap * (g.cell_rows - 1)) / g.cell_rows;
  if (cap) {
    g.cell_w = std::min(MeshGeometry::kMaxCellW, g.cell_w);
    g.cell_h = std::min(MeshGeometry::kMaxCellH, g.cell_h);
  }
  return g.cell_w > 0 && g.cell_h > 0;
}

// Node boxes shrink to their cells; the grid is centred in the area.
void shrink_and_centre(MeshGeometry& g, const QRectF& area) {
  g.node_w = g.cell_cols * g.cell_w + g.cell_gap * (g.cell_cols - 1) + 2 * g.pad;
  g.node_h = g.header + g.cell_rows * g.cell_h + g.cell_gap * (g.cell_rows - 1) + 2 * g.pad;
  const double gw = g.node_cols * g.node_w + g.gap * (g.node_cols - 1);
  const double gh = g.node_rows * g.node_h + g.gap * (g.node_rows - 1);
  g.grid = QRectF(area.left() + (area.width() - gw) / 2, area.top() + (area.height() - gh) / 2, gw, gh);
}
}  // namespace

MeshGeometry MeshGeometry::fit(int nodes, int per_node, const QRectF& area) {
  MeshGeometry none;
  if (nodes < 1 || per_node < 1 || area.width() < 4 || area.height() < 4) return none;
  // 1. Roomy: cells per row inside a node up to 8 (a DGX row), 10 px between nodes, a header
  //    when the node is tall enough. Prefer the layout whose cells are largest in their smaller
  //    dimension (readable numbers), with a mild preference for cells wider than tall; any layout
  //    that can print the coordinates beats one that cannot, then one with numbers.
  MeshGeometry best;
  double best_size = -1;
  const int cell_cols = std::min(per_node, 8);
  for (int cols = 1; cols <= nodes; ++cols) {
    MeshGeometry g;
    g.nodes = nodes;
    g.per_node = per_node;
    const double node_w = (area.width() - 10.0 * (cols - 1)) / cols;
    const int rows = (nodes + cols - 1) / cols;
    const double node_h = (area.height() - 10.0 * (rows - 1)) / rows;
    g.pad = node_w > 120 ? 6 : 3;
    g.header = node_h > 60 ? 18 : 0;
    if (!size_cells(g, cols, cell_cols, area, true) || g.cell_w <= 2 || g.cell_h <= 2) continue;
    double size = std::min(g.cell_w, g.cell_h * 1.3);
    if (g.cell_w >= 54 && g.cell_h >= 34) size += 1000;
    else if (g.cell_w >= 16 && g.cell_h >= 12) size += 500;
    if (size > best_size) {
      best_size = size;
      best = g;
    }
  }
  if (best_size >= 0 && best.cell_w >= kMinRankPx && best.cell_h >= kMinRankPx) {
    shrink_and_centre(best, area);
    return best;
  }
  // 2. Dense: too many nodes for readable ranks at this size. 2 px between nodes (none when even
  //    that leaves no room), cells touching; any number of cell columns up to 8, so nodes come
  //    out closer to square. The view aggregates; zooming in brings back gaps and labels.
  for (double gap : {2.0, 0.0}) {
    best_size = -1;
    for (int cc = 1; cc <= std::min(per_node, 8); ++cc) {
      for (int cols = 1; cols <= nodes; ++cols) {
        MeshGeometry g;
        g.nodes = nodes;
        g.per_node = per_node;
        g.dense = true;
        g.gap = gap;
        g.pad = gap > 0 ? 1 : 0;
        g.header = 0;
        g.cell_gap = 0;
        if (!size_cells(g, cols, cc, area, false)) continue;
        const double size = std::min(g.cell_w, g.cell_h * 1.3);
        if (size > best_size) {
          best_size = size;
          best = g;
        }
      }
    }
    if (best_size > 0) {
      shrink_and_centre(best, area);
      return best;
    }
  }
  return none;
}

QRectF MeshGeometry::node_rect(int node) const {
  const int col = node % node_cols, row = node / node_cols;
  return QRectF(grid.left() + col * pitch_x(), grid.top() + row * pitch_y(), node_w, node_h);
}

QRectF MeshGeometry::cell_rect(int node, int local) const {
  const QRectF n = node_rect(node);
  const int cx = local % cell_cols, cy = local / cell_cols;
  return QRectF(n.left() + pad + cx * (cell_w + cell_gap), n.top() + header + pad + cy * (cell_h + cell_gap),
                cell_w, cell_h);
}

QRectF MeshGeometry::piece_rect(int node, int local) const {
  const QRectF n = node_rect(node);
  const int cx = local % cell_cols, cy = local / cell_cols;
  const double w = cell_w + cell_gap, h = cell_h + cell_gap;
  return QRectF(n.left() + pad + cx * w - cell_gap / 2, n.top() + header + pad + cy * h - cell_gap / 2, w, h);
}

int MeshGeometry::node_at(QPointF p) const {
  if (!valid() || !grid.contains(p)) return -1;
  const int col = static_cast<int>(std::floor((p.x() - grid.left()) / pitch_x()));
  const int row = static_cast<int>(std::floor((p.y() - grid.top()) / pitch_y()));
  if (col < 0 || col >= node_cols || row < 0 || row >= node_rows) return -1;
  const int node = row * node_cols + col;
  if (node >= nodes || !node_rect(node).contains(p)) return -1;
  return node;
}

int MeshGeometry::local_at(int node, QPointF p, bool exact) const {
  if (node < 0 || node >= nodes) return -1;
  const QRectF n = node_rect(node);
  const double w = cell_w + cell_gap, h = cell_h + cell_gap;
  // Pieces start half a gap before their cell, so shift by that before dividing by the pitch.
  const double x = p.x() - (n.left() + pad) + cell_gap / 2, y = p.y() - (n.top() + header + pad) + cell_gap / 2;
  const int cx = static_cast<int>(std::floor(x / w)), cy = static_cast<int>(std::floor(y / h));
  if (cx < 0 || cx >= cell_cols || cy < 0 || cy >= cell_rows) return -1;
  const int local = cy * cell_cols + cx;
  if (local >= per_node) return -1;
  if (exact && !cell_rect(node, local).adjusted(-1, -1, 1, 1).contains(p)) return -1;
  return local;
}

MeshGeometry::Span MeshGeometry::span(const QRectF& r) const {
  Span s;
  if (!valid()) return s;
  s.col0 = std::max(0, static_cast<int>(std::floor((r.left() - grid.left()) / pitch_x())));
  s.col1 = std::min(node_cols - 1, static_cast<int>(std::floor((r.right() - grid.left()) / pitch_x())));
  s.row0 = std::max(0, static_cast<int>(std::floor((r.top() - grid.top()) / pitch_y())));
  s.row1 = std::min(node_rows - 1, static_cast<int>(std::floor((r.bottom() - grid.top()) / pitch_y())));
  return s;
}

}  // namespace meshwork::ui
