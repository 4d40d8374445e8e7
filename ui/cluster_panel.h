// The Cluster mode: add nodes (host, user@host:port, ~/.ssh/config alias, or a hostfile), probe
// them with progress per node, accept unknown host keys by fingerprint, and see each node as a
// card. The local machine is always there first and needs no SSH.
#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QScrollArea;
class QTimer;

namespace meshwork::ui {

class ClusterModel;
class NodeCard;
class NodeGrid;
class NodeProber;

class ClusterPanel : public QWidget {
  Q_OBJECT
 public:
  ClusterPanel(ClusterModel* model, NodeProber* prober, QWidget* parent = nullptr);

  // Adds each host named in `text` (comma or space separated) and probes it; errors in core's
  // words go under the field.
  void add_hosts(const QString& text);
  Q_SLOT void add_hostfile();  // file dialog
  void add_hostfile(const QString& path);
  Q_SLOT void probe_all();
  void probe(const QString& host);
  // Trusts the fingerprint the node's card shows (after the user's yes) and probes again.
  void accept_host_key(const QString& host);
  // The card of `host`, scrolled into view (only cards on screen exist: the grid is virtualized);
  // nullptr when no node has that host.
  NodeCard* card(const QString& host);
  NodeGrid* grid() const { return grid_; }
  QString add_error() const;
  // When false, unknown host keys are asked about with a dialog; tests answer directly.
  void set_ask_host_keys(bool ask) { ask_host_keys_ = ask; }

 Q_SIGNALS:
  void node_selected(int row);
  void status_message(const QString& text);

 private:
  // Shows `host`'s card as probing at `progress` % with `text`; false when no card has that host.
  bool mark_probing(const QString& host, int progress, const QString& text);
  void update_summary();
  void on_host_key(const QString& host, const QString& fingerprint);

  ClusterModel* model_;
  NodeProber* prober_;
  QLineEdit* host_edit_;
  QLabel* add_error_;
  QLabel* summary_;
  NodeGrid* grid_;
  QTimer* summary_timer_;
  bool ask_host_keys_ = true;
};

}  // namespace meshwork::ui
