// Widget setup the workbench's panels repeat: the panel's column layout, a word-wrapping label under
// the others, a field with its button on a row, a named spin box. Each returns the widget it made, owned by `parent`.
#pragma once

#include <QLabel>
#include <QMargins>
#include <QString>
#include <utility>

class QBoxLayout;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QVBoxLayout;
class QWidget;

namespace meshwork::ui {

// A word-wrapping label that asks its layout for the height its text needs at its width. Qt's
// layouts (a form row, a row beside fields, a scroll area's column) give a wrapped QLabel the
// height of its one-line hint, and its lines then overlap what follows.
class WrappedLabel : public QLabel {
 public:
  explicit WrappedLabel(QWidget* parent = nullptr);
  // Holds the label's minimum height at what its text needs at its width: call after setText()
  // (a new width calls it by itself).
  void fit_height();

 protected:
  void resizeEvent(QResizeEvent* e) override;
};

// The vertical layout of `owner`, with `margins` around it and `spacing` between its items.
QVBoxLayout* new_column_layout(QWidget* owner, const QMargins& margins, int spacing);

// A word-wrapping label (text set later) with the object name `name`, added to the end of `layout`.
QLabel* add_wrapped_label(QBoxLayout* layout, QWidget* parent, const QString& name = QString());

// A line edit showing `placeholder` while empty, then a button labelled `button_text`, at the end
// of `row`; the edit takes the row's spare width.
std::pair<QLineEdit*, QPushButton*> add_field_and_button(QBoxLayout* row, QWidget* parent, const QString& field_name,
                                                         const QString& placeholder, const QString& button_text,
                                                         const QString& button_name);

// A spin box over [lo, hi] at `value`, with the object name `name` and the tooltip `tip`.
QSpinBox* new_spin_box(QWidget* parent, const QString& name, int lo, int hi, int value, const QString& tip);

}  // namespace meshwork::ui
