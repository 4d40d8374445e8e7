// A layout that places items left to right and wraps, like text (Qt's Flow Layout example, trimmed).
// The cluster panel uses it so node cards fill the width whatever the window size.
#pragma once

#include <QLayout>
#include <QList>

namespace meshwork::ui {

class FlowLayout : public QLayout {
 public:
  explicit FlowLayout(QWidget* parent = nullptr, int spacing = 12);
  ~FlowLayout() override;
  void addItem(QLayoutItem* item) override;
  int count() const override { return static_cast<int>(items_.size()); }
  QLayoutItem* itemAt(int i) const override { return items_.value(i); }
  QLayoutItem* takeAt(int i) override { return i >= 0 && i < items_.size() ? items_.takeAt(i) : nullptr; }
  Qt::Orientations expandingDirections() const override { return {}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override { return arrange(QRect(0, 0, width, 0), false); }
  void setGeometry(const QRect& rect) override;
  QSize sizeHint() const override { return minimumSize(); }
  QSize minimumSize() const override;

 private:
  int arrange(const QRect& rect, bool apply) const;
  QList<QLayoutItem*> items_;
  int spacing_;
};

// A row of controls that wraps like text (the toolbars of Runs, Monitor and Compare): a new widget
// under `parent` holding a FlowLayout, 8 px apart, no margins. The row is layout->parentWidget().
FlowLayout* new_control_row(QWidget* parent);

}  // namespace meshwork::ui
