// The Cluster mode: add nodes (host, user@host:port, ~/.ssh/config alias, or a hostfile), probe
// them with progress per node, accept unknown host keys by fingerprint, and see each node as a
// card. The local machine is always there first and needs no SSH.
#pragma once

#include <QWidget>
#include <vector>

class QLabel;
class QLineEdit;
class QScrollArea;

namespace meshwork::ui {

class ClusterModel;
class FlowLayout;
class NodeCard;
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
  NodeCard* card(const QString& host) const;
  QString add_error() const;
  // When false, unknown host keys are asked about with a dialog; tests answer directly.
  void set_ask_host_keys(bool ask) { ask_host_keys_ = ask; }

 Q_SIGNALS:
  void node_selected(int row);
  void status_message(const QString& text);

 private:
  // Shows `host`'s card as probing at `progress` % with `text`; false when no card has that host.
  bool mark_probing(const QString& host, int progress, const QString& text);
  void rebuild_cards();
  void update_card(int row);
  void on_host_key(const QString& host, const QString& fingerprint);

  ClusterModel* model_;
  NodeProber* prober_;
  QLineEdit* host_edit_;
  QLabel* add_error_;
  QLabel* summary_;
  QWidget* cards_host_;
  FlowLayout* flow_;
  std::vector<NodeCard*> cards_;
  QString selected_;
  bool ask_host_keys_ = true;
};

}  // namespace meshwork::ui
