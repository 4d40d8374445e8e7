#include "ui/node_grid.h"

#include <QEvent>
#include <QLayout>
#include <QScrollBar>
#include <algorithm>

#include "ui/cluster_model.h"
#include "ui/node_card.h"

namespace meshwork::ui {

namespace {
constexpr int kSpacing = 14;  // between cards, both ways (the flow layout's spacing)
constexpr int kMarginY = 8;   // above the first line and below the last
}  // namespace

NodeGrid::NodeGrid(ClusterModel* model, QWidget* parent) : QAbstractScrollArea(parent), model_(model) {
  setObjectName("NodeGrid");
  setFrameShape(QFrame::NoFrame);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  verticalScrollBar()->setSingleStep(40);
  measurer_ = new NodeCard(viewport());
  measurer_->setObjectName("NodeCardMeasurer");
  measurer_->hide();
  connect(model_, &ClusterModel::modelReset, this, &NodeGrid::rebuild);
  connect(model_, &ClusterModel::rowsInserted, this, &NodeGrid::rebuild);
  connect(model_, &ClusterModel::rowsRemoved, this, &NodeGrid::rebuild);
  connect(model_, &ClusterModel::dataChanged, this,
          [this](const QModelIndex& a, const QModelIndex& b) { rows_changed(a.row(), b.row()); });
  rebuild();
}

int NodeGrid::card_widget_count() const {
  return static_cast<int>(viewport()->findChildren<NodeCard*>(Qt::FindDirectChildrenOnly).size());
}

NodeCard* NodeGrid::live_card(int row) const {
  auto it = live_.find(row);
  return it == live_.end() ? nullptr : it->second;
}

std::pair<int, int> NodeGrid::live_rows() const {
  if (live_.empty()) return {-1, -1};
  int lo = live_.begin()->first, hi = lo;
  for (const auto& [row, card] : live_) {
    lo = std::min(lo, row);
    hi = std::max(hi, row);
  }
  return {lo, hi};
}

int NodeGrid::measure(const NodeInfo& node) {
  const QString key = NodeCard::height_key(node);
  if (auto it = height_of_key_.constFind(key); it != height_of_key_.constEnd()) return *it;
  measurer_->set_node(node);
  measurer_->ensurePolished();
  measurer_->layout()->invalidate();
  const int h = measurer_->sizeHint().height();
  height_of_key_.insert(key, h);
  return h;
}

void NodeGrid::rebuild() {
  const int n = model_->rowCount();
  card_h_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) card_h_[static_cast<size_t>(r)] = measure(model_->node(r));
  // Rows moved (or vanished): every card gets its row again from the model.
  release_all();
  relayout_lines();
  place_cards();
}

void NodeGrid::rows_changed(int first, int last) {
  bool heights_changed = false;
  for (int r = std::max(0, first); r <= last && r < model_->rowCount(); ++r) {
    const int h = measure(model_->node(r));
    if (h != card_h_[static_cast<size_t>(r)]) {
      card_h_[static_cast<size_t>(r)] = h;
      heights_changed = true;
    }
    if (NodeCard* c = live_card(r)) {
      c->set_node(model_->node(r));
      c->set_selected(model_->node(r).host == selected_);
      if (const int exact = exact_height(c); exact != card_h_[static_cast<size_t>(r)]) {
        card_h_[static_cast<size_t>(r)] = exact;
        heights_changed = true;
      }
    }
  }
  if (heights_changed) {
    relayout_lines();
    place_cards();
  }
}

void NodeGrid::relayout_lines() {
  const int width = viewport()->width();
  columns_ = std::max(1, (width + kSpacing) / (NodeCard::kCardWidth + kSpacing));
  const int n = static_cast<int>(card_h_.size());
  const int lines = (n + columns_ - 1) / columns_;
  line_h_.assign(static_cast<size_t>(lines), 0);
  line_top_.assign(static_cast<size_t>(lines), 0);
  for (int r = 0; r < n; ++r) {
    int& h = line_h_[static_cast<size_t>(r / columns_)];
    h = std::max(h, card_h_[static_cast<size_t>(r)]);
  }
  // Tops are prefix sums of (line height + spacing): content y of line k.
  int y = kMarginY;
  for (int k = 0; k < lines; ++k) {
    line_top_[static_cast<size_t>(k)] = y;
    y += line_h_[static_cast<size_t>(k)] + kSpacing;
  }
  content_h_ = lines > 0 ? y - kSpacing + kMarginY : 0;
  QScrollBar* bar = verticalScrollBar();
  bar->setPageStep(std::max(1, viewport()->height()));
  bar->setRange(0, std::max(0, content_h_ - viewport()->height()));
}

NodeCard* NodeGrid::acquire() {
  if (!spare_.empty()) {
    NodeCard* c = spare_.back();
    spare_.pop_back();
    return c;
  }
  auto* c = new NodeCard(viewport());
  // The card names its host in every signal, so a recycled card needs no re-wiring.
  connect(c, &NodeCard::clicked, this, [this](const QString& host) {
    set_selected_host(host);
    Q_EMIT card_clicked(host);
  });
  connect(c, &NodeCard::remove_requested, this, &NodeGrid::remove_requested);
  connect(c, &NodeCard::probe_requested, this, &NodeGrid::probe_requested);
  connect(c, &NodeCard::trust_requested, this, &NodeGrid::trust_requested);
  connect(c, &NodeCard::slots_changed, this, &NodeGrid::slots_changed);
  return c;
}

void NodeGrid::release_all() {
  for (auto& [row, card] : live_) {
    card->hide();
    spare_.push_back(card);
  }
  live_.clear();
}

int NodeGrid::exact_height(NodeCard* card) const {
  card->ensurePolished();
  card->layout()->invalidate();
  return card->sizeHint().height();
}

void NodeGrid::place_cards() {
  if (placing_) return;  // setValue() below scrolls, which places again
  placing_ = true;
  // Cards that come on screen are measured exactly; when one differs from its cached estimate
  // the lines move and the placement runs once more with the true heights. A view scrolled to
  // the end stays at the end.
  QScrollBar* bar = verticalScrollBar();
  const bool at_end = bar->maximum() > 0 && bar->value() == bar->maximum();
  for (int pass = 0; pass < 3 && place_lines(); ++pass) {
    relayout_lines();
    if (at_end) bar->setValue(bar->maximum());
  }
  placing_ = false;
}

bool NodeGrid::place_lines() {
  bool corrected = false;
  const int top = verticalScrollBar()->value(), bottom = top + viewport()->height();
  // Lines overlapping [top, bottom): the first whose bottom edge is below `top`, up to the
  // last whose top is above `bottom` (binary searches over the sorted tops).
  const auto first_it = std::upper_bound(line_top_.begin(), line_top_.end(), top);
  int first = static_cast<int>(first_it - line_top_.begin()) - 1;
  if (first < 0) first = 0;
  const int last = static_cast<int>(std::lower_bound(line_top_.begin(), line_top_.end(), bottom) - line_top_.begin()) - 1;
  const int n = model_->rowCount();
  const int row_lo = first * columns_, row_hi = std::min(n - 1, (last + 1) * columns_ - 1);
  // Cards of rows that left the viewport become spares first, so they can be reused below.
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->first < row_lo || it->first > row_hi) {
      it->second->hide();
      spare_.push_back(it->second);
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
  for (int r = row_lo; r <= row_hi && last >= first; ++r) {
    NodeCard* c = live_card(r);
    if (!c) {
      c = acquire();
      c->set_node(model_->node(r));
      c->set_selected(model_->node(r).host == selected_);
      live_.emplace(r, c);
      if (const int exact = exact_height(c); exact != card_h_[static_cast<size_t>(r)]) {
        card_h_[static_cast<size_t>(r)] = exact;
        corrected = true;
      }
    }
    const int line = r / columns_, col = r % columns_;
    c->setGeometry(col * (NodeCard::kCardWidth + kSpacing), line_top_[static_cast<size_t>(line)] - top,
                   NodeCard::kCardWidth, card_h_[static_cast<size_t>(r)]);
    if (c->isHidden()) c->show();
  }
  // Spares beyond what one screenful needs are deleted: the widget count stays bounded by the
  // window, whatever scrolled past.
  while (spare_.size() > live_.size() + static_cast<size_t>(columns_)) {
    spare_.back()->deleteLater();
    spare_.back()->setParent(nullptr);
    spare_.pop_back();
  }
  return corrected;
}

NodeCard* NodeGrid::reveal(int row) {
  if (row < 0 || row >= model_->rowCount()) return nullptr;
  const size_t line = static_cast<size_t>(row / columns_);
  QScrollBar* bar = verticalScrollBar();
  const int top = line_top_[line] - kMarginY, bottom = line_top_[line] + line_h_[line] + kMarginY;
  if (top < bar->value()) bar->setValue(top);
  else if (bottom > bar->value() + viewport()->height()) bar->setValue(std::min(top, bottom - viewport()->height()));
  place_cards();  // also when the value did not change: the row may have had no card yet
  if (NodeCard* c = live_card(row)) return c;
  // A viewport too small to show any line (a hidden window): give the row its card anyway.
  NodeCard* c = acquire();
  c->set_node(model_->node(row));
  c->set_selected(model_->node(row).host == selected_);
  live_.emplace(row, c);
  return c;
}

void NodeGrid::set_selected_host(const QString& host) {
  selected_ = host;
  for (auto& [row, card] : live_) card->set_selected(card->host() == host);
}

void NodeGrid::resizeEvent(QResizeEvent* e) {
  QAbstractScrollArea::resizeEvent(e);
  relayout_lines();
  place_cards();
}

void NodeGrid::scrollContentsBy(int, int) { place_cards(); }

void NodeGrid::changeEvent(QEvent* e) {
  QAbstractScrollArea::changeEvent(e);
  // A theme or font change changes how tall the same text is: measure again.
  if (e->type() == QEvent::StyleChange || e->type() == QEvent::FontChange) {
    height_of_key_.clear();
    rebuild();
  }
}

}  // namespace meshwork::ui
