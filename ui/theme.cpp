#include "ui/theme.h"

#include <QApplication>
#include <QPainter>
#include <QPixmap>
#include <QWidget>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace meshwork::ui {

namespace {
Theme g_theme = Theme::light;

QPalette make_palette(Theme theme, QStyle* style) {
  QPalette p;
  if (theme == Theme::dark) {
    const QColor window("#1f2226"), base("#16181b"), text("#e3e5e8"), button("#2a2e33");
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor("#1c1f23"));
    p.setColor(QPalette::ToolTipBase, QColor("#2f3338"));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, QColor("#8a9099"));
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, button);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor("#ff6b6b"));
    p.setColor(QPalette::Highlight, QColor("#3d7bd9"));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor("#6fb1ff"));
    p.setColor(QPalette::Mid, QColor("#3a3f45"));
    p.setColor(QPalette::Dark, QColor("#121417"));
    p.setColor(QPalette::Light, QColor("#3a3f45"));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor("#6b7078"));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor("#6b7078"));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor("#6b7078"));
  } else {
    p = style->standardPalette();
    p.setColor(QPalette::Window, QColor("#f3f4f6"));
    p.setColor(QPalette::Base, Qt::white);
    p.setColor(QPalette::AlternateBase, QColor("#f7f8fa"));
    p.setColor(QPalette::Highlight, QColor("#2f6fd1"));
    p.setColor(QPalette::Button, QColor("#fafbfc"));
  }
  return p;
}

QString style_sheet(Theme theme) {
  const bool dark = theme == Theme::dark;
  // The mode bar is dark in both themes, as in Qt Creator: it frames the workspace.
  return QString(R"(
    #ModeBar { background: %1; }
    #ModeBar QToolButton { color: #c8ccd2; border: none; padding: 10px 2px 8px 2px;
                           font-size: 11px; border-left: 3px solid transparent; }
    #ModeBar QToolButton:hover { background: %2; }
    #ModeBar QToolButton:checked { color: white; background: %3; border-left: 3px solid #3d8bfd; }
    QLabel[role="heading"] { font-size: 15px; font-weight: 600; }
    QLabel[role="muted"] { color: %4; }
    QLabel[role="error"] { color: %5; }
    QLabel[role="warning"] { color: %6; }
    QToolBar { spacing: 6px; border: none; }
    QToolBar QToolButton#PrimaryAction { background: #2f6fd1; color: white; border-radius: 4px;
                                         padding: 4px 14px; font-weight: 600; }
    QToolBar QToolButton#PrimaryAction:disabled { background: %7; color: %4; }
    QToolBar QToolButton#PrimaryAction:hover { background: #3d7be0; }
    QDockWidget::title { padding: 6px; font-weight: 600; }
  )")
      .arg(dark ? "#15171a" : "#2b2f35", dark ? "#24282d" : "#3a3f46", dark ? "#2c3137" : "#454b53",
           dark ? "#8a9099" : "#6b7280", dark ? "#ff6b6b" : "#c62828", dark ? "#f5b940" : "#a86200",
           dark ? "#33373d" : "#d5d8dd");
}
}  // namespace

void apply_theme(QApplication& app, Theme theme) {
  g_theme = theme;
  if (app.style()->name().compare("fusion", Qt::CaseInsensitive) != 0)
    app.setStyle(QStyleFactory::create("Fusion"));  // the application owns it
  app.setPalette(make_palette(theme, app.style()));
  app.setStyleSheet(style_sheet(theme));
}

Theme current_theme() { return g_theme; }

QColor error_color() { return is_dark() ? QColor("#ff6b6b") : QColor("#c62828"); }
QColor warning_color() { return is_dark() ? QColor("#f5b940") : QColor("#a86200"); }
QColor ok_color() { return is_dark() ? QColor("#4cc38a") : QColor("#1b8a4b"); }
QColor muted_text_color() { return is_dark() ? QColor("#8a9099") : QColor("#6b7280"); }
QColor card_color() { return is_dark() ? QColor("#262a2f") : QColor("#ffffff"); }

bool save_widget_png(QWidget* widget, const QString& path) {
  const qreal dpr = 2.0;
  QPixmap pm(widget->size() * dpr);
  pm.setDevicePixelRatio(dpr);
  pm.fill(card_color());
  QPainter p(&pm);
  p.setRenderHint(QPainter::Antialiasing);
  widget->render(&p);
  p.end();
  return pm.save(path, "PNG");
}
QColor border_color() { return is_dark() ? QColor("#3a3f45") : QColor("#d9dce1"); }

}  // namespace meshwork::ui
