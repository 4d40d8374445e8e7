#include "ui/panel_widgets.h"

#include <QBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace meshwork::ui {

WrappedLabel::WrappedLabel(QWidget* parent) : QLabel(parent) { setWordWrap(true); }

void WrappedLabel::fit_height() {
  const int needed = text().isEmpty() || width() <= 0 ? 0 : heightForWidth(width());
  if (minimumHeight() != needed) setMinimumHeight(needed);
}

void WrappedLabel::resizeEvent(QResizeEvent* e) {
  QLabel::resizeEvent(e);
  fit_height();
}

QVBoxLayout* new_column_layout(QWidget* owner, const QMargins& margins, int spacing) {
  auto* column = new QVBoxLayout(owner);
  column->setContentsMargins(margins);
  column->setSpacing(spacing);
  return column;
}

QLabel* add_wrapped_label(QBoxLayout* layout, QWidget* parent, const QString& name) {
  auto* label = new QLabel(parent);
  label->setObjectName(name);
  label->setWordWrap(true);
  layout->addWidget(label);
  return label;
}

std::pair<QLineEdit*, QPushButton*> add_field_and_button(QBoxLayout* row, QWidget* parent, const QString& field_name,
                                                         const QString& placeholder, const QString& button_text,
                                                         const QString& button_name) {
  auto* field = new QLineEdit(parent);
  field->setObjectName(field_name);
  field->setPlaceholderText(placeholder);
  auto* button = new QPushButton(button_text, parent);
  button->setObjectName(button_name);
  row->addWidget(field, 1);
  row->addWidget(button);
  return {field, button};
}

QSpinBox* new_spin_box(QWidget* parent, const QString& name, int lo, int hi, int value, const QString& tip) {
  auto* box = new QSpinBox(parent);
  box->setObjectName(name);
  box->setRange(lo, hi);
  box->setValue(value);
  box->setToolTip(tip);
  return box;
}

}  // namespace meshwork::ui
