// The Cluster view's cards as a virtualized grid: the model may hold a thousand nodes, but a
// NodeCard widget exists only for the rows on screen (plus a few spares to recycle and one hidden
// card that measures heights). Scrolling re-assigns the same widgets to other rows; a model change
// touches only the cards it concerns. Cards keep their look and behaviour (they are the same
// NodeCard widgets the panel always had); only their number is bounded by the window, not the
// cluster.
//
// Geometry: cards are kCardWidth wide, in as many columns as fit; a line of cards is as tall as
// its tallest card (as the old flow layout did). A card's height depends only on what wraps or
// hides inside it, so heights are cached by NodeCard::height_key(): 1,024 fresh nodes measure
// one card, not 1,024. Cards on screen are measured exactly; off-screen rows keep the cached
// height of their key until they scroll in.
#pragma once

#include <QAbstractScrollArea>
#include <QHash>
#include <unordered_map>
#include <vector>

namespace meshwork::ui {

class ClusterModel;
class NodeCard;
struct NodeInfo;

class NodeGrid : public QAbstractScrollArea {
  Q_OBJECT
 public:
  explicit NodeGrid(ClusterModel* model, QWidget* parent = nullptr);

  void set_selected_host(const QString& host);
  const QString& selected_host() const { return selected_; }
  // Scrolls `row` into view and returns its card (created or recycled for it); nullptr when the
  // row does not exist.
  NodeCard* reveal(int row);
  // The card showing `row` now; nullptr when the row is scrolled away (it has no card then).
  NodeCard* live_card(int row) const;
  int live_card_count() const { return static_cast<int>(live_.size()); }
  // Every NodeCard widget this grid owns: live ones, spares, and the measuring card.
  int card_widget_count() const;
  int columns() const { return columns_; }
  // The first and last model rows that have a card now ({-1, -1}: none).
  std::pair<int, int> live_rows() const;

 Q_SIGNALS:
  void card_clicked(const QString& host);
  void remove_requested(const QString& host);
  void probe_requested(const QString& host);
  void trust_requested(const QString& host);
  void slots_changed(const QString& host, int ranks);

 protected:
  void resizeEvent(QResizeEvent* e) override;
  void scrollContentsBy(int dx, int dy) override;
  void changeEvent(QEvent* e) override;

 private:
  void rebuild();                         // rows added/removed/reset: every height, every line
  void rows_changed(int first, int last);  // dataChanged: those rows only
  void relayout_lines();                  // columns, line heights and tops from card_h_
  void place_cards();                     // cards for the lines in the viewport, recycled
  bool place_lines();                     // one pass; true when a card's true height differed
  int exact_height(NodeCard* card) const;  // of a card showing its node now
  int measure(const NodeInfo& node);      // a card's height for `node`, cached by its key
  NodeCard* acquire();
  void release_all();

  ClusterModel* model_;
  NodeCard* measurer_;                    // hidden; never shown, never a live card
  QHash<QString, int> height_of_key_;
  std::vector<int> card_h_;               // per model row
  std::vector<int> line_h_, line_top_;    // per line of cards, in content coordinates
  int columns_ = 1;
  int content_h_ = 0;
  std::unordered_map<int, NodeCard*> live_;  // model row -> its card
  std::vector<NodeCard*> spare_;
  QString selected_;
  bool placing_ = false;
};

}  // namespace meshwork::ui
