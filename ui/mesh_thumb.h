// A run's mesh shape drawn small (Compare mode): one box per dp_replicate replica, framed in that
// axis's colour; inside, dp_shard rows of cp x tp cells, cells tinted by the innermost axis that is
// larger than 1 (its group from core). Enough to see at a glance how two shapes differ; a shape
// too large to draw cell by cell (1024 replicas) shows the part that fits and says so.
#pragma once

#include <QColor>
#include <QWidget>

#include "core/mesh.h"

namespace meshwork::ui {

class MeshThumb : public QWidget {
  Q_OBJECT
 public:
  MeshThumb(const MeshShape& shape, const QString& name, const QColor& run_color, QWidget* parent = nullptr);
  QSize sizeHint() const override { return {170, 130}; }
  const MeshShape& shape() const { return shape_; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  MeshShape shape_;
  QString name_;
  QColor run_color_;
};

}  // namespace meshwork::ui
