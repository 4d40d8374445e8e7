// The mesh drawn over the nodes (custom painted): nodes as boxes, ranks as cells labelled with
// their rank and (dp_replicate, dp_shard, cp, tp) coordinates, pipeline stages (pp > 1) as a bar
// under their ranks with arrows in pipeline order, the groups of one axis (or of a
// flattened group) filled in that axis's colour, and every group of the hovered rank outlined in
// its axis colour. tp groups that cross nodes, or that sit on a node whose GPUs only talk over
// PCIe, are marked.
//
// Any size: cells shrink (dropping coordinates, then numbers); when ranks would be narrower than
// a few pixels (1,024 nodes x 8 in the workbench), nodes are drawn aggregated — a tile per node
// whose stripes are its ranks' colours, or, smaller still, one tile per block of nodes. The wheel
// zooms (about the pointer) down to single ranks, a drag pans. Painting visits only what is on
// screen at the current zoom, so its cost follows the window's size, not the rank count. Which
// rank is where comes from core's DeviceMesh; where a node's box goes from MeshGeometry.
#pragma once

#include <QStringList>
#include <QWidget>
#include <array>
#include <optional>
#include <vector>

#include "core/mesh.h"
#include "ui/mesh_geometry.h"
#include "ui/rank_health.h"

namespace meshwork::ui {

class MeshView : public QWidget {
  Q_OBJECT
 public:
  // The keys keyPressEvent() handles, (keys, what they do) for Help's list of shortcuts.
  static QList<QPair<QString, QString>> keys();

  // What one screen cell stands for at the current zoom.
  enum class Detail { ranks, nodes, blocks };

  explicit MeshView(QWidget* parent = nullptr);

  // The mesh to draw (nullopt: the shape is invalid; a hint says so). `fast_links[n]` is false when
  // node n's devices are joined by PCIe only; `node_names[n]` labels the node boxes.
  void set_mesh(const std::optional<DeviceMesh>& mesh, std::vector<bool> fast_links,
                QStringList node_names);
  void set_invalid_text(const QString& text);
  void set_group_kind(GroupKind kind);
  GroupKind group_kind() const { return kind_; }
  void set_selected_rank(int rank);
  int selected_rank() const { return selected_; }
  int selected_node() const { return selected_node_; }
  int hovered_rank() const { return hovered_; }

  // Zoom (1 = the whole mesh fits) about `anchor` (widget coordinates): the point under it stays.
  void set_zoom(double zoom, QPointF anchor);
  double zoom() const { return zoom_; }
  double max_zoom() const;  // where a rank's cell is full size
  void pan_by(QPointF delta);
  void reset_view();        // zoom 1, centred
  Detail detail() const;

  // For tests and the inspector: what the view currently shows (widget coordinates).
  int world_size() const { return mesh_ ? mesh_->world_size() : 0; }
  const std::optional<DeviceMesh>& mesh() const { return mesh_; }
  QRectF cell_rect(int rank) const;          // a rank's cell
  QRectF node_rect(int node) const;          // a node's box
  QColor cell_fill(int rank) const;          // the fill the rank's cell is painted with
  bool rank_marked_slow(int rank) const;     // its tp group crosses nodes or slow links
  // Pipeline stages (pp > 1): each rank's stage, and the colour of the bar drawn under the ranks
  // of a stage (the pp axis's hue, lighter for each later stage). Arrows join stage s's last
  // rank to stage s + 1's first: the order activations travel.
  int stages() const { return mesh_ ? mesh_->shape()[Axis::pp] : 1; }
  int stage_of(int rank) const { return mesh_ ? mesh_->coord_of(rank)[Axis::pp] : 0; }
  QColor stage_color(int stage) const;
  int rank_at(QPointF pos) const;            // -1 when none (or ranks too small to point at)
  int node_at(QPointF pos) const;            // -1 when none
  QString tooltip_at(QPointF pos) const;     // what hovering there shows ("" when nothing)
  const MeshGeometry& geometry() const { return geo_; }

  // Live rank states (the Health view): while set, a cell's fill says what its rank does instead
  // of its group, culprits get a thick outline and the tooltip the rank's words. Sized to the
  // world; anything else clears them.
  void set_rank_health(std::vector<RankHealth> states, std::vector<QString> notes);
  void clear_rank_health();
  bool showing_health() const { return !health_.empty(); }
  RankHealth rank_health(int rank) const;
  int painted_items() const { return painted_; }  // cells, tiles and blocks the last paint drew

  QSize sizeHint() const override { return {720, 420}; }
  QSize minimumSizeHint() const override { return {240, 160}; }

 Q_SIGNALS:
  void rank_hovered(int rank);  // -1 when the pointer leaves the cells
  void rank_clicked(int rank);
  void node_clicked(int node);  // a click on a node drawn aggregated
  void selection_changed(int rank);  // by click or set_selected_rank()
  void group_kind_changed(meshwork::GroupKind kind);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void keyPressEvent(QKeyEvent*) override;  // arrows move the selection, Esc clears it, +/-/0 zoom
  void leaveEvent(QEvent*) override;
  bool event(QEvent* e) override;

 private:
  void relayout();
  void recompute_groups();
  QRectF draw_area() const;
  QRectF to_screen(const QRectF& world) const;
  QPointF to_world(QPointF screen) const;
  void clamp_pan();
  void ensure_visible(int rank);
  bool pieces_visible() const;  // aggregated nodes show one stripe per rank
  int block_side() const;       // nodes per block side in Detail::blocks
  void paint_ranks(class QPainter& p, const MeshGeometry::Span& s);
  void paint_nodes(class QPainter& p, const MeshGeometry::Span& s);
  void paint_blocks(class QPainter& p, const MeshGeometry::Span& s);
  void paint_legend(class QPainter& p, const QRectF& r);
  // Stage bars under the cells (or under the node tiles) and the arrows between stages.
  void paint_stages(class QPainter& p, const MeshGeometry::Span& s, bool cells);
  void set_hovered(int rank, int node);
  void click(QPointF pos);
  // The hovered (else selected) rank's groups per axis, and the nodes they touch: computed once
  // per focus change, never per paint.
  struct Focus {
    int rank = -1;
    std::array<std::vector<int>, kAxisCount> members;
    std::array<std::vector<int>, kAxisCount> nodes;
    std::vector<int> ep_members, ep_nodes;  // its expert-parallel group (ep > 1)
  };
  const Focus& focus(int rank) const;

  std::optional<DeviceMesh> mesh_;
  std::vector<bool> fast_links_;
  QStringList node_names_;
  QString invalid_text_;
  GroupKind kind_ = GroupKind::dp_shard;
  int hovered_ = -1, hovered_node_ = -1;
  int selected_ = -1, selected_node_ = -1;
  MeshGeometry geo_;
  double zoom_ = 1;
  QPointF pan_;                   // screen = world * zoom + pan
  QPointF press_pos_, press_pan_;
  bool pressed_ = false, dragging_ = false;
  mutable Focus focus_;
  mutable int painted_ = 0;
  std::vector<int> group_index_;  // per rank, for kind_
  int group_count_ = 0;
  std::vector<char> slow_tp_;     // per rank: its tp group crosses nodes or slow links
  std::vector<char> slow_node_;   // per node: one of its ranks is slow
  bool any_slow_ = false;
  bool any_cross_node_ = false;
  std::vector<RankHealth> health_;  // per rank, empty when not showing health
  std::vector<QString> health_notes_;
};

}  // namespace meshwork::ui
