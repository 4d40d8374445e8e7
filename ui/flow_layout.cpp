#include "ui/flow_layout.h"

#include <QWidget>

namespace meshwork::ui {

FlowLayout::FlowLayout(QWidget* parent, int spacing) : QLayout(parent), spacing_(spacing) {}

FlowLayout::~FlowLayout() {
  while (QLayoutItem* item = takeAt(0)) delete item;
}

void FlowLayout::addItem(QLayoutItem* item) { items_.append(item); }

void FlowLayout::setGeometry(const QRect& rect) {
  QLayout::setGeometry(rect);
  arrange(rect, true);
}

QSize FlowLayout::minimumSize() const {
  QSize size;
  for (const QLayoutItem* item : items_) size = size.expandedTo(item->minimumSize());
  const QMargins m = contentsMargins();
  return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

int FlowLayout::arrange(const QRect& rect, bool apply) const {
  const QMargins m = contentsMargins();
  const QRect r = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom());
  int x = r.x(), y = r.y(), line_height = 0;
  for (QLayoutItem* item : items_) {
    if (item->widget() && item->widget()->isHidden() && apply) continue;  // hidden on purpose
    const QSize hint = item->sizeHint();
    if (x + hint.width() > r.right() + 1 && line_height > 0) {
      x = r.x();
      y += line_height + spacing_;
      line_height = 0;
    }
    if (apply) item->setGeometry(QRect(QPoint(x, y), hint));
    x += hint.width() + spacing_;
    line_height = std::max(line_height, hint.height());
  }
  return y + line_height - rect.y() + m.bottom();
}

FlowLayout* new_control_row(QWidget* parent) {
  auto* row = new FlowLayout(new QWidget(parent), 8);
  row->setContentsMargins(0, 0, 0, 0);
  return row;
}

}  // namespace meshwork::ui
