// One node of the cluster as a card: state, host, CPU and memory, GPUs (name, memory), how the GPUs
// are linked (NVLink / PCIe), InfiniBand ports, the ranks it runs, and probe progress or the
// probe's error inline. Rebuilt from a NodeInfo whenever the model row changes.
#pragma once

#include <QFrame>

#include "ui/cluster_model.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace meshwork::ui {

class NodeCard : public QFrame {
  Q_OBJECT
 public:
  static constexpr int kCardWidth = 340;
  explicit NodeCard(QWidget* parent = nullptr);
  void set_node(const NodeInfo& node);
  // Everything about `node` that changes the card's height (what wraps, what is shown or
  // hidden), and nothing that does not (the host name, probe progress): two nodes with the same
  // key give cards of the same height, so a view of 1,024 nodes measures a handful of cards.
  static QString height_key(const NodeInfo& node);
  void set_selected(bool selected);
  const QString& host() const { return host_; }
  // For tests: the texts shown.
  QString devices_text() const;
  QString error_text() const;

  QSize sizeHint() const override { return {kCardWidth, QFrame::sizeHint().height()}; }

 Q_SIGNALS:
  void clicked(const QString& host);
  void remove_requested(const QString& host);
  void probe_requested(const QString& host);
  void trust_requested(const QString& host);  // "Review key…" on a node waiting for a decision
  void slots_changed(const QString& host, int ranks);

 protected:
  void mousePressEvent(QMouseEvent*) override;
  void paintEvent(QPaintEvent*) override;

 private:
  QString host_;
  NodeInfo::State state_ = NodeInfo::State::unprobed;
  bool selected_ = false;
  QLabel* title_;
  QLabel* subtitle_;
  QLabel* state_label_;
  QToolButton* remove_;
  QProgressBar* progress_;
  QLabel* progress_text_;
  QLabel* error_;
  QPushButton* retry_;
  QLabel* devices_;
  QLabel* links_;
  QLabel* ib_;
  QSpinBox* ranks_;
};

}  // namespace meshwork::ui
