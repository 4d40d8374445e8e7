// A run's mesh shape drawn small (Compare mode): one box per dp_replicate replica, framed in that
// axis's colour; inside, dp_shard rows of cp x tp cells, cells tinted by the innermost axis that is
// larger than 1 (its group from core). Enough to see at a glance how two shapes differ; a shape
// too large to draw cell by cell (1024 replicas) shows the part that fits and says so. A run whose
// shape was not recorded (another tool's run) says so instead of drawing any shape.
#pragma once

#include <QColor>
#include <QWidget>
#include <optional>

#include "core/mesh.h"

namespace meshwork::ui {

class MeshThumb : public QWidget {
  Q_OBJECT
 public:
  MeshThumb(const std::optional<MeshShape>& shape, const QString& name, const QColor& run_color,
            QWidget* parent = nullptr);
  QSize sizeHint() const override { return {170, 130}; }
  const std::optional<MeshShape>& shape() const { return shape_; }
  QString caption() const;  // the line under the drawing: "1×2×1×1  ·  2 ranks", or "shape not recorded"

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::optional<MeshShape> shape_;
  QString name_;
  QColor run_color_;
};

}  // namespace meshwork::ui
