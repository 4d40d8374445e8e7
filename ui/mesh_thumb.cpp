#include "ui/mesh_thumb.h"

#include <QPainter>
#include <algorithm>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

MeshThumb::MeshThumb(const MeshShape& shape, const QString& name, const QColor& run_color, QWidget* parent)
    : QWidget(parent), shape_(shape), name_(name), run_color_(run_color) {
  setMinimumSize(150, 120);
  setToolTip(QStringLiteral("%1: %2").arg(name, format_shape_named(shape)));
}

void MeshThumb::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const bool dark = is_dark();
  const QRectF all = QRectF(rect()).adjusted(2, 2, -2, -2);
  p.setPen(QPen(border_color(), 1));
  p.setBrush(card_color());
  p.drawRoundedRect(all, 5, 5);
  // Caption: the run's colour swatch, its name, its shape.
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  const QFontMetricsF fm(f);
  const QRectF swatch(all.left() + 8, all.top() + 8, 10, 10);
  p.setPen(Qt::NoPen);
  p.setBrush(run_color_);
  p.drawRoundedRect(swatch, 2, 2);
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(QRectF(swatch.right() + 5, all.top() + 4, all.width() - 30, fm.height() + 2), Qt::AlignLeft | Qt::AlignVCenter,
             fm.elidedText(name_, Qt::ElideRight, all.width() - 32));
  p.setPen(muted_text_color());
  const QString shape_text = format_shape(shape_);
  p.drawText(QRectF(all.left() + 8, all.bottom() - fm.height() - 6, all.width() - 16, fm.height() + 2),
             Qt::AlignLeft | Qt::AlignVCenter, shape_text + QStringLiteral("  ·  %1 ranks").arg(shape_.world_size()));

  const QRectF area(all.left() + 8, all.top() + fm.height() + 12, all.width() - 16, all.height() - 2 * fm.height() - 22);
  const int reps = std::max(1, shape_[Axis::dp_replicate]), rows = std::max(1, shape_[Axis::dp_shard]);
  const int cols = std::max(1, shape_[Axis::cp] * shape_[Axis::tp]);
  const double gap = 4;
  const double box_w = (area.width() - gap * (reps - 1)) / reps;
  const double cell = std::max(2.0, std::min((box_w - 6) / cols, (area.height() - 6) / rows));
  const Axis inner = shape_[Axis::tp] > 1 ? Axis::tp : shape_[Axis::cp] > 1 ? Axis::cp : Axis::dp_shard;
  for (int r = 0; r < reps; ++r) {
    const QRectF box(area.left() + r * (box_w + gap), area.top(), box_w, cell * rows + 6);
    p.setPen(QPen(shape_[Axis::dp_replicate] > 1 ? axis_color(Axis::dp_replicate, dark) : border_color(), 1.5));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(box, 3, 3);
    const double x0 = box.left() + (box.width() - cell * cols) / 2;
    for (int row = 0; row < rows; ++row) {
      for (int c = 0; c < cols; ++c) {
        const QRectF cr(x0 + c * cell + 0.75, box.top() + 3 + row * cell + 0.75, cell - 1.5, cell - 1.5);
        // Neighbouring groups of the inner axis in alternating shades, as the mesh view does.
        const int group = inner == Axis::dp_shard ? row : (inner == Axis::tp ? row * shape_[Axis::cp] + c / shape_[Axis::tp] : row);
        p.setPen(Qt::NoPen);
        p.setBrush(group_shade(group_of_axis(inner), group % 2, 2, dark));
        p.drawRect(cr);
      }
    }
  }
}

}  // namespace meshwork::ui
