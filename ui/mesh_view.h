// The mesh drawn over the nodes (custom painted): nodes as boxes, ranks as cells labelled with
// their rank and (dp_replicate, dp_shard, cp, tp) coordinates, the groups of one axis (or of a
// flattened group) filled in that axis's colour, and every group of the hovered rank outlined in
// its axis colour. tp groups that cross nodes, or that sit on a node whose GPUs only talk over
// PCIe, are marked. Cells shrink (dropping coordinates, then numbers) so 64 nodes x 8 still fit.
#pragma once

#include <QStringList>
#include <QWidget>
#include <optional>
#include <vector>

#include "core/mesh.h"

namespace meshwork::ui {

class MeshView : public QWidget {
  Q_OBJECT
 public:
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
  int hovered_rank() const { return hovered_; }

  // For tests and the inspector: what the view currently shows.
  int world_size() const { return mesh_ ? mesh_->world_size() : 0; }
  const std::optional<DeviceMesh>& mesh() const { return mesh_; }
  QRectF cell_rect(int rank) const;          // widget coordinates of a rank's cell
  QColor cell_fill(int rank) const;           // the fill the rank's cell is painted with
  bool rank_marked_slow(int rank) const;      // its tp group crosses nodes or slow links
  int rank_at(QPointF pos) const;             // -1 when none

  QSize sizeHint() const override { return {720, 420}; }
  QSize minimumSizeHint() const override { return {240, 160}; }

 Q_SIGNALS:
  void rank_hovered(int rank);  // -1 when the pointer leaves the cells
  void rank_clicked(int rank);
  void selection_changed(int rank);  // by click or set_selected_rank()
  void group_kind_changed(meshwork::GroupKind kind);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;  // arrows move the selection, Esc clears it
  void leaveEvent(QEvent*) override;
  bool event(QEvent* e) override;

 private:
  struct Layout {
    int node_cols = 1;
    int cell_cols = 1, cell_rows = 1;
    double node_w = 0, node_h = 0, cell_w = 0, cell_h = 0, header = 0, pad = 0;
    QRectF grid;  // where the nodes are drawn
  };
  void relayout();
  void recompute_groups();
  QRectF node_rect(int node) const;
  void paint_legend(class QPainter& p, const QRectF& r);
  void set_hovered(int rank);

  std::optional<DeviceMesh> mesh_;
  std::vector<bool> fast_links_;
  QStringList node_names_;
  QString invalid_text_;
  GroupKind kind_ = GroupKind::dp_shard;
  int hovered_ = -1;
  int selected_ = -1;
  Layout layout_;
  std::vector<int> group_index_;  // per rank, for kind_
  int group_count_ = 0;
  std::vector<char> slow_tp_;     // per rank: its tp group crosses nodes or slow links
  bool any_slow_ = false;
  bool any_cross_node_ = false;
};

}  // namespace meshwork::ui
