#include "ui/mesh_view.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "ui/axis_colors.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
constexpr double kLegendHeight = 54;
constexpr double kZoomStep = 1.25;    // one wheel notch
constexpr double kMinTilePx = 3;      // nodes smaller than this on screen are drawn in blocks
constexpr double kMinPiecePx = 2;     // a rank's stripe inside a node tile, at least this wide
constexpr double kDragPx = 4;         // a press that moves further is a pan, not a click
}  // namespace

MeshView::MeshView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setObjectName("MeshView");
}

void MeshView::set_mesh(const std::optional<DeviceMesh>& mesh, std::vector<bool> fast_links,
                        QStringList node_names) {
  // The same placement again (the plan changed something else): keep the user's zoom and pan.
  const bool same_place = mesh_ && mesh && mesh_->world_size() == mesh->world_size() &&
                          mesh_->gpus_per_node() == mesh->gpus_per_node();
  mesh_ = mesh;
  if (!mesh_ || health_.size() != static_cast<size_t>(mesh_->world_size())) {
    health_.clear();
    health_notes_.clear();
  }
  fast_links_ = std::move(fast_links);
  node_names_ = std::move(node_names);
  if (mesh_ && selected_ >= mesh_->world_size()) selected_ = -1;
  if (!mesh_ || selected_node_ >= mesh_->num_nodes()) selected_node_ = -1;
  hovered_ = hovered_node_ = -1;
  focus_ = Focus{};
  recompute_groups();
  relayout();
  if (!same_place) reset_view();
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
  if (rank >= 0) selected_node_ = -1;
  ensure_visible(rank);
  update();
  Q_EMIT selection_changed(rank);
}

void MeshView::recompute_groups() {
  group_index_.clear();
  slow_tp_.clear();
  slow_node_.clear();
  group_count_ = 0;
  any_slow_ = any_cross_node_ = false;
  if (!mesh_) return;
  const int n = mesh_->world_size();
  group_index_.resize(static_cast<size_t>(n));
  slow_tp_.assign(static_cast<size_t>(n), 0);
  slow_node_.assign(static_cast<size_t>(mesh_->num_nodes()), 0);
  group_count_ = n / std::max(1, mesh_->shape().group_size(kind_));
  for (int r = 0; r < n; ++r) group_index_[static_cast<size_t>(r)] = mesh_->group_index(r, kind_);
  if (mesh_->shape()[Axis::tp] > 1) {
    for (int r = 0; r < n; ++r) {
      const bool crosses = mesh_->group_crosses_nodes(r, GroupKind::tp);
      const int node = mesh_->node_of(r);
      const bool slow_node = node < static_cast<int>(fast_links_.size()) &&
                             !fast_links_[static_cast<size_t>(node)];
      slow_tp_[static_cast<size_t>(r)] = crosses || slow_node;
      slow_node_[static_cast<size_t>(node)] |= static_cast<char>(crosses || slow_node);
      any_cross_node_ |= crosses;
      any_slow_ |= crosses || slow_node;
    }
  }
}

// ---- Geometry and the view transform ------------------------------------------------------

QRectF MeshView::draw_area() const { return QRectF(rect()).adjusted(12, 10, -12, -(kLegendHeight + 6)); }

void MeshView::relayout() {
  geo_ = mesh_ ? MeshGeometry::fit(mesh_->num_nodes(), mesh_->gpus_per_node(), draw_area()) : MeshGeometry{};
  zoom_ = std::clamp(zoom_, 1.0, max_zoom());
  clamp_pan();
}

QRectF MeshView::to_screen(const QRectF& w) const {
  return QRectF(w.left() * zoom_ + pan_.x(), w.top() * zoom_ + pan_.y(), w.width() * zoom_, w.height() * zoom_);
}

QPointF MeshView::to_world(QPointF s) const { return (s - pan_) / zoom_; }

double MeshView::max_zoom() const {
  if (!geo_.valid()) return 1;
  // Far enough that a cell reaches its full size (numbers and coordinates printed).
  return std::max(1.0, std::min(MeshGeometry::kMaxCellW / geo_.cell_w, MeshGeometry::kMaxCellH / geo_.cell_h));
}

void MeshView::set_zoom(double zoom, QPointF anchor) {
  const QPointF world = to_world(anchor);
  zoom_ = std::clamp(zoom, 1.0, max_zoom());
  pan_ = anchor - world * zoom_;  // the world point under the anchor stays under it
  clamp_pan();
  update();
}

void MeshView::pan_by(QPointF delta) {
  pan_ += delta;
  clamp_pan();
  update();
}

void MeshView::reset_view() {
  zoom_ = 1;
  pan_ = {};
  clamp_pan();
  update();
}

// The grid never leaves the area: along an axis where it is smaller than the area it is centred,
// otherwise its edges stay at or beyond the area's.
void MeshView::clamp_pan() {
  if (!geo_.valid()) {
    pan_ = {};
    return;
  }
  const QRectF a = draw_area(), g = geo_.grid;
  auto clamp_axis = [&](double& pan, double g0, double g1, double a0, double a1) {
    if ((g1 - g0) * zoom_ <= a1 - a0) pan = (a0 + a1) / 2 - (g0 + g1) / 2 * zoom_;
    else pan = std::clamp(pan, a1 - g1 * zoom_, a0 - g0 * zoom_);
  };
  double x = pan_.x(), y = pan_.y();
  clamp_axis(x, g.left(), g.right(), a.left(), a.right());
  clamp_axis(y, g.top(), g.bottom(), a.top(), a.bottom());
  pan_ = {x, y};
}

void MeshView::ensure_visible(int rank) {
  if (!mesh_ || rank < 0 || rank >= mesh_->world_size() || zoom_ <= 1) return;
  const QRectF c = cell_rect(rank), a = draw_area();
  if (a.contains(c)) return;
  pan_ += a.center() - c.center();
  clamp_pan();
}

MeshView::Detail MeshView::detail() const {
  if (geo_.cell_w * zoom_ >= MeshGeometry::kMinRankPx && geo_.cell_h * zoom_ >= MeshGeometry::kMinRankPx)
    return Detail::ranks;
  if (geo_.node_w * zoom_ >= kMinTilePx && geo_.node_h * zoom_ >= kMinTilePx) return Detail::nodes;
  return Detail::blocks;
}

bool MeshView::pieces_visible() const {
  return (geo_.cell_w + geo_.cell_gap) * zoom_ >= kMinPiecePx && (geo_.cell_h + geo_.cell_gap) * zoom_ >= kMinPiecePx;
}

int MeshView::block_side() const {
  const double tile = std::min(geo_.pitch_x(), geo_.pitch_y()) * zoom_;
  return std::max(1, static_cast<int>(std::ceil(kMinTilePx * 1.5 / std::max(tile, 1e-6))));
}

QRectF MeshView::cell_rect(int rank) const {
  if (!mesh_ || rank < 0 || rank >= mesh_->world_size() || !geo_.valid()) return {};
  return to_screen(geo_.cell_rect(mesh_->node_of(rank), mesh_->local_rank_of(rank)));
}

QRectF MeshView::node_rect(int node) const {
  if (!mesh_ || node < 0 || node >= mesh_->num_nodes() || !geo_.valid()) return {};
  return to_screen(geo_.node_rect(node));
}

int MeshView::node_at(QPointF pos) const {
  if (!mesh_ || !geo_.valid() || !draw_area().contains(pos)) return -1;
  return geo_.node_at(to_world(pos));
}

int MeshView::rank_at(QPointF pos) const {
  const int node = node_at(pos);
  if (node < 0) return -1;
  const Detail d = detail();
  if (d == Detail::blocks || (d == Detail::nodes && !pieces_visible())) return -1;
  const int local = geo_.local_at(node, to_world(pos), d == Detail::ranks);
  if (local < 0) return -1;
  const int r = mesh_->rank_on_node(node, local);
  return r < mesh_->world_size() ? r : -1;
}

void MeshView::set_rank_health(std::vector<RankHealth> states, std::vector<QString> notes) {
  if (!mesh_ || states.size() != static_cast<size_t>(mesh_->world_size()) || notes.size() != states.size()) {
    clear_rank_health();
    return;
  }
  health_ = std::move(states);
  health_notes_ = std::move(notes);
  update();
}

void MeshView::clear_rank_health() {
  if (health_.empty()) return;
  health_.clear();
  health_notes_.clear();
  update();
}

RankHealth MeshView::rank_health(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= health_.size()) return RankHealth::unknown;
  return health_[static_cast<size_t>(rank)];
}

QColor MeshView::cell_fill(int rank) const {
  const bool dark = is_dark();
  if (!mesh_ || rank < 0 || rank >= mesh_->world_size()) return {};
  if (!health_.empty()) return rank_health_color(health_[static_cast<size_t>(rank)], dark);
  if (group_count_ == mesh_->world_size())  // groups of one: nothing to tell apart
    return dark ? QColor("#3a3f45") : QColor("#e4e7eb");
  return group_shade(kind_, group_index_[static_cast<size_t>(rank)], group_count_, dark);
}

bool MeshView::rank_marked_slow(int rank) const {
  return rank >= 0 && rank < static_cast<int>(slow_tp_.size()) && slow_tp_[static_cast<size_t>(rank)];
}

const MeshView::Focus& MeshView::focus(int rank) const {
  if (focus_.rank == rank || !mesh_) return focus_;
  focus_ = Focus{};
  focus_.rank = rank;
  if (rank < 0 || rank >= mesh_->world_size()) return focus_;
  if (mesh_->shape().ep > 1) {
    focus_.ep_members = mesh_->expert_group_members(rank, ExpertGroupKind::ep);
    for (int m : focus_.ep_members) focus_.ep_nodes.push_back(mesh_->node_of(m));
    focus_.ep_nodes.erase(std::unique(focus_.ep_nodes.begin(), focus_.ep_nodes.end()), focus_.ep_nodes.end());
  }
  for (Axis a : kAxes) {
    const GroupKind g = group_of_axis(a);
    if (mesh_->shape().group_size(g) <= 1) continue;
    auto& members = focus_.members[static_cast<size_t>(a)];
    members = mesh_->group_members(rank, g);
    auto& nodes = focus_.nodes[static_cast<size_t>(a)];
    for (int m : members) nodes.push_back(mesh_->node_of(m));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  }
  return focus_;
}

// ---- Input ---------------------------------------------------------------------------------

void MeshView::resizeEvent(QResizeEvent*) { relayout(); }

void MeshView::set_hovered(int rank, int node) {
  if (rank == hovered_ && node == hovered_node_) return;
  const bool rank_changed = rank != hovered_;
  hovered_ = rank;
  hovered_node_ = node;
  update();
  if (rank_changed) Q_EMIT rank_hovered(rank);
}

void MeshView::mouseMoveEvent(QMouseEvent* e) {
  if (pressed_ && (e->buttons() & Qt::LeftButton)) {
    const QPointF d = e->position() - press_pos_;
    if (!dragging_ && std::abs(d.x()) + std::abs(d.y()) >= kDragPx && zoom_ > 1) dragging_ = true;
    if (dragging_) {
      pan_ = press_pan_ + d;
      clamp_pan();
      update();
      return;
    }
  }
  set_hovered(rank_at(e->position()), node_at(e->position()));
}

void MeshView::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return QWidget::mousePressEvent(e);
  pressed_ = true;
  dragging_ = false;
  press_pos_ = e->position();
  press_pan_ = pan_;
}

void MeshView::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || !pressed_) return QWidget::mouseReleaseEvent(e);
  pressed_ = false;
  if (!dragging_) click(e->position());
  dragging_ = false;
}

// A click selects what is drawn under it: a rank, a node (drawn aggregated: the inspector shows
// the node), or, on a block of nodes, zooms in there.
void MeshView::click(QPointF pos) {
  switch (detail()) {
    case Detail::ranks: {
      const int r = rank_at(pos);
      if (r < 0) return;
      selected_ = r;
      selected_node_ = -1;
      update();
      Q_EMIT rank_clicked(r);
      Q_EMIT selection_changed(r);
      return;
    }
    case Detail::nodes: {
      const int node = node_at(pos);
      if (node < 0) return;
      selected_node_ = node;
      selected_ = -1;
      update();
      Q_EMIT node_clicked(node);
      return;
    }
    case Detail::blocks: set_zoom(zoom_ * 4, pos); return;
  }
}

void MeshView::wheelEvent(QWheelEvent* e) {
  const double notches = e->angleDelta().y() / 120.0;
  if (notches == 0 || !geo_.valid()) return QWidget::wheelEvent(e);
  set_zoom(zoom_ * std::pow(kZoomStep, notches), e->position());
  set_hovered(rank_at(e->position()), node_at(e->position()));
  e->accept();
}

void MeshView::leaveEvent(QEvent*) { set_hovered(-1, -1); }

QList<QPair<QString, QString>> MeshView::keys() {
  return {{tr("Arrows"), tr("Mesh view: select the next rank (up/down: a row of a node)")},
          {tr("PgUp / PgDown"), tr("Mesh view: the same rank on the previous / next node")},
          {tr("Esc"), tr("Mesh view: clear the selection")},
          {tr("+ / −"), tr("Mesh view: zoom in / out")},
          {tr("0"), tr("Mesh view: fit the whole mesh")}};
}

void MeshView::keyPressEvent(QKeyEvent* e) {
  if (!mesh_) return QWidget::keyPressEvent(e);
  const int n = mesh_->world_size();
  int r = selected_ < 0 ? 0 : selected_;
  switch (e->key()) {
    case Qt::Key_Left: r = std::max(0, r - 1); break;
    case Qt::Key_Right: r = std::min(n - 1, r + 1); break;
    case Qt::Key_Up: r = std::max(0, r - geo_.cell_cols); break;  // a row of cells inside a node
    case Qt::Key_Down: r = std::min(n - 1, r + geo_.cell_cols); break;
    case Qt::Key_PageUp: r = std::max(0, r - mesh_->gpus_per_node()); break;  // previous node
    case Qt::Key_PageDown: r = std::min(n - 1, r + mesh_->gpus_per_node()); break;
    case Qt::Key_Escape: set_selected_rank(-1); return;
    case Qt::Key_Plus:
    case Qt::Key_Equal: set_zoom(zoom_ * 2, draw_area().center()); return;
    case Qt::Key_Minus: set_zoom(zoom_ / 2, draw_area().center()); return;
    case Qt::Key_0: reset_view(); return;
    default: return QWidget::keyPressEvent(e);
  }
  set_selected_rank(r);
}

bool MeshView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && mesh_) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QString tip = tooltip_at(he->pos());
    if (tip.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(he->globalPos(), tip, this);
    return true;
  }
  return QWidget::event(e);
}

}  // namespace meshwork::ui
