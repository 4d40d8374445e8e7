// Where the mesh view puts nodes and rank cells: pure geometry, no painting and no mesh math
// (which rank sits on which node comes from core's DeviceMesh; this file only places node boxes
// in a grid and a node's local ranks inside its box).
//
// Coordinates are the view's "world": the widget's pixels at zoom 1. Nodes fill a grid of
// node_cols columns, row-major; inside a node, local ranks fill cell_cols columns, row-major.
//
//   node box (col, row):  x = grid.left + col * (node_w + gap),  y = grid.top + row * (node_h + gap)
//   cell (cx, cy):        x = node.x + pad + cx * (cell_w + cell_gap),
//                         y = node.y + header + pad + cy * (cell_h + cell_gap)
//
// fit() chooses the grid: the roomy layout (10 px between nodes, a header naming the node) when
// its cells can be at least kMinRankPx; otherwise a dense one (2 px between nodes, no header, no
// gap between cells) whose cells may be a pixel wide: the view then draws nodes aggregated and
// the user zooms in to see ranks.
#pragma once

#include <QPointF>
#include <QRectF>

namespace meshwork::ui {

struct MeshGeometry {
  static constexpr double kMinRankPx = 6;     // narrower cells are drawn aggregated (per node)
  static constexpr double kMaxCellW = 92, kMaxCellH = 64;

  int nodes = 0, per_node = 1;
  int node_cols = 1, node_rows = 1, cell_cols = 1, cell_rows = 1;
  double node_w = 0, node_h = 0, cell_w = 0, cell_h = 0;
  double header = 0, pad = 0, gap = 10, cell_gap = 2;
  bool dense = false;
  QRectF grid;  // the nodes' bounding box, centred in the area

  // The best grid for `nodes` nodes of `per_node` ranks inside `area` (invalid when the area is
  // empty or nodes < 1).
  static MeshGeometry fit(int nodes, int per_node, const QRectF& area);
  bool valid() const { return nodes > 0 && cell_w > 0 && cell_h > 0; }

  double pitch_x() const { return node_w + gap; }
  double pitch_y() const { return node_h + gap; }
  QRectF node_rect(int node) const;
  QRectF cell_rect(int node, int local) const;
  // The cell's share of its node with the gaps between cells given to it: the pieces tile the
  // node's inner area (what the aggregated drawing fills).
  QRectF piece_rect(int node, int local) const;
  // The node whose box contains `p`, or -1 (between boxes, outside the grid).
  int node_at(QPointF p) const;
  // The local rank whose cell (exact) or piece (!exact) contains `p` inside `node`, or -1.
  int local_at(int node, QPointF p, bool exact) const;

  // The columns and rows of node boxes that meet `r` (empty when col0 > col1 or row0 > row1).
  struct Span {
    int col0 = 0, col1 = -1, row0 = 0, row1 = -1;
  };
  Span span(const QRectF& r) const;
};

}  // namespace meshwork::ui
