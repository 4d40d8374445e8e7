#include "ui/mode_bar.h"

#include <QButtonGroup>
#include <QPainter>
#include <QPainterPath>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/panel_widgets.h"

namespace meshwork::ui {

namespace {
// Simple line icons in the mode bar's text colour.
QIcon mode_icon(Mode mode) {
  QPixmap px(56, 56);
  px.setDevicePixelRatio(2.0);
  px.fill(Qt::transparent);
  QPainter p(&px);
  p.setRenderHint(QPainter::Antialiasing);
  const QColor c("#d7dbe0");
  p.setPen(QPen(c, 1.8, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
  p.setBrush(Qt::NoBrush);
  switch (mode) {
    case Mode::cluster:  // three stacked servers
      for (int i = 0; i < 3; ++i) {
        p.drawRoundedRect(QRectF(5, 4 + i * 7.2, 18, 5.5), 1.5, 1.5);
        p.drawPoint(QPointF(8.5, 6.75 + i * 7.2));
      }
      break;
    case Mode::plan:  // a 4x2 mesh of cells, one group filled
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 4; ++x) {
          const QRectF r(4 + x * 5.3, 8 + y * 6.5, 4.3, 5.2);
          if (y == 0 && x < 2) p.setBrush(c);
          p.drawRect(r);
          p.setBrush(Qt::NoBrush);
        }
      break;
    case Mode::runs: {  // a loss curve
      QPainterPath path(QPointF(5, 8));
      path.cubicTo(QPointF(9, 19), QPointF(13, 20), QPointF(23, 21));
      p.drawPath(path);
      p.drawLine(QPointF(4, 4), QPointF(4, 24));
      p.drawLine(QPointF(4, 24), QPointF(24, 24));
      break;
    }
    case Mode::compare: {  // two curves
      QPainterPath a(QPointF(5, 7)), b(QPointF(5, 11));
      a.cubicTo(QPointF(9, 18), QPointF(14, 19), QPointF(23, 20));
      b.cubicTo(QPointF(11, 20), QPointF(16, 16), QPointF(23, 15));
      p.drawPath(a);
      p.setPen(QPen(c, 1.8, Qt::DashLine));
      p.drawPath(b);
      break;
    }
  }
  return QIcon(px);
}
}  // namespace

ModeBar::ModeBar(QWidget* parent) : QWidget(parent), group_(new QButtonGroup(this)) {
  setObjectName("ModeBar");
  setAttribute(Qt::WA_StyledBackground);
  setFixedWidth(78);
  auto* lay = new_column_layout(this, {0, 6, 0, 6}, 2);
  const struct { Mode mode; const char* text; const char* tip; } kModes[] = {
      {Mode::cluster, "Cluster", "Nodes, devices and links (Ctrl+1)"},
      {Mode::plan, "Plan", "Mesh shape, memory and the planner (Ctrl+2)"},
      {Mode::runs, "Runs", "Every run in the store (Ctrl+3)"},
      {Mode::compare, "Compare", "Runs side by side (Ctrl+4)"},
  };
  for (const auto& m : kModes) {
    auto* b = new QToolButton(this);
    b->setText(tr(m.text));
    b->setToolTip(tr(m.tip));
    b->setIcon(mode_icon(m.mode));
    b->setIconSize(QSize(28, 28));
    b->setToolButtonStyle(Qt::ToolButtonTextUnderIcon);
    b->setCheckable(true);
    b->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    b->setObjectName(QStringLiteral("Mode%1").arg(m.text));
    group_->addButton(b, static_cast<int>(m.mode));
    buttons_.push_back(b);
    lay->addWidget(b);
  }
  lay->addStretch();
  group_->setExclusive(true);
  connect(group_, &QButtonGroup::idClicked, this, [this](int id) {
    mode_ = static_cast<Mode>(id);
    Q_EMIT mode_changed(mode_);
  });
  set_mode(Mode::plan);
}

void ModeBar::set_mode(Mode mode) {
  mode_ = mode;
  buttons_[static_cast<size_t>(mode)]->setChecked(true);
  Q_EMIT mode_changed(mode);
}

}  // namespace meshwork::ui
