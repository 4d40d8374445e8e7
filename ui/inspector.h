// The inspector on the right: details of whatever is selected. A node shows everything its probe
// found; a rank shows its node, its coordinates and the members of every group it belongs to,
// each in its axis colour, with the groups that cross nodes flagged.
#pragma once

#include <QWidget>

#include "core/mesh.h"
#include "ui/cluster_model.h"

class QLabel;

namespace meshwork::ui {

class Inspector : public QWidget {
  Q_OBJECT
 public:
  explicit Inspector(QWidget* parent = nullptr);
  void show_nothing();
  void show_node(const NodeInfo& node, int index);
  void show_rank(const DeviceMesh& mesh, int rank, const QStringList& node_names);
  QString text() const;

 private:
  QLabel* title_;
  QLabel* body_;
};

}  // namespace meshwork::ui
