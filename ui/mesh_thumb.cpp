#include "ui/mesh_thumb.h"

#include <QPainter>
#include <algorithm>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

MeshThumb::MeshThumb(const std::optional<MeshShape>& shape, const QString& name, const QColor& run_color,
                     QWidget* parent)
    : QWidget(parent), shape_(shape), name_(name), run_color_(run_color) {
  setMinimumSize(150, 120);
  setToolTip(shape ? QStringLiteral("%1: %2").arg(name, format_shape_named(*shape))
                   : tr("%1: its tool did not record a mesh shape").arg(name));
}

QString MeshThumb::caption() const {
  if (!shape_) return tr("shape not recorded");
  return format_shape(*shape_) + QStringLiteral("  ·  %1 ranks").arg(shape_->world_size());
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
  p.drawText(QRectF(all.left() + 8, all.bottom() - fm.height() - 6, all.width() - 16, fm.height() + 2),
             Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(caption(), Qt::ElideRight, all.width() - 16));

  const QRectF area(all.left() + 8, all.top() + fm.height() + 12, all.width() - 16, all.height() - 2 * fm.height() - 22);
  if (!shape_) {
    // No shape to draw: a dashed empty frame, so the gap reads as "unknown", not as one rank.
    p.setPen(QPen(border_color(), 1, Qt::DashLine));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(area, 3, 3);
    p.setPen(muted_text_color());
    p.drawText(area.adjusted(4, 4, -4, -4), Qt::AlignCenter | Qt::TextWordWrap, tr("not recorded by its tool"));
    return;
  }
  const MeshShape& shape = *shape_;
  const int reps = std::max(1, shape[Axis::dp_replicate]), rows = std::max(1, shape[Axis::dp_shard]);
  const int cols = std::max(1, shape[Axis::cp] * shape[Axis::tp]);
  // Any size: at most as many replica boxes as fit (14 px, or 3 px per cell of a row of up to 8), rows and columns as have 3 px; the rest are
  // summarised ("+N") rather than drawn a fraction of a pixel wide. The cost follows the thumb.
  const double gap = 4;
  const int shown_reps = std::clamp(static_cast<int>((area.width() + gap) / (std::max(14, std::min(cols, 8) * 3 + 6) + gap)), 1, reps);
  const double box_w = (area.width() - gap * (shown_reps - 1)) / shown_reps;
  const int shown_rows = std::clamp(static_cast<int>((area.height() - 6) / 3), 1, rows);
  const int shown_cols = std::clamp(static_cast<int>((box_w - 6) / 3), 1, cols);
  const double cell = std::max(2.0, std::min((box_w - 6) / shown_cols, (area.height() - 6) / shown_rows));
  const Axis inner = shape[Axis::tp] > 1 ? Axis::tp : shape[Axis::cp] > 1 ? Axis::cp : Axis::dp_shard;
  // Which group a cell is in comes from core's mesh math (one rank per node: placement plays no
  // part in a thumb).
  const auto mesh = DeviceMesh::create(shape, 1);
  for (int r = 0; r < shown_reps; ++r) {
    const QRectF box(area.left() + r * (box_w + gap), area.top(), box_w, cell * shown_rows + 6);
    p.setPen(QPen(shape[Axis::dp_replicate] > 1 ? axis_color(Axis::dp_replicate, dark) : border_color(), 1.5));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(box, 3, 3);
    const double x0 = box.left() + (box.width() - cell * shown_cols) / 2;
    for (int row = 0; row < shown_rows; ++row) {
      for (int c = 0; c < shown_cols; ++c) {
        const QRectF cr(x0 + c * cell + 0.75, box.top() + 3 + row * cell + 0.75, cell - 1.5, cell - 1.5);
        int group = row;
        if (mesh) {
          MeshCoord coord;
          coord.set(Axis::dp_replicate, r);
          coord.set(Axis::dp_shard, row);
          coord.set(Axis::cp, c / std::max(1, shape[Axis::tp]));
          coord.set(Axis::tp, c % std::max(1, shape[Axis::tp]));
          group = mesh->group_index(mesh->rank_of(coord), group_of_axis(inner));
        }
        // Neighbouring groups of the inner axis in alternating shades, as the mesh view does.
        p.setPen(Qt::NoPen);
        p.setBrush(group_shade(group_of_axis(inner), group % 2, 2, dark));
        p.drawRect(cr);
      }
    }
  }
  if (shown_reps < reps || shown_rows < rows || shown_cols < cols) {
    p.setPen(muted_text_color());
    p.drawText(QRectF(area.left(), area.top() + cell * shown_rows + 8, area.width() - 2, fm.height()), Qt::AlignRight | Qt::AlignTop,
               tr("part of %1 × %2 × %3").arg(reps).arg(rows).arg(cols));
  }
}

}  // namespace meshwork::ui
