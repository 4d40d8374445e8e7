// Light and dark themes: a Fusion palette plus a small style sheet for the mode bar and cards.
// Widgets that paint themselves ask is_dark() and palette() rather than hard-coding colours.
#pragma once

#include <QColor>

class QString;
class QWidget;

class QApplication;

namespace meshwork::ui {

enum class Theme { light, dark };

void apply_theme(QApplication& app, Theme theme);
Theme current_theme();
inline bool is_dark() { return current_theme() == Theme::dark; }

// Semantic colours shared by painted widgets.
QColor error_color();    // red for "does not fit" and invalid fields
QColor warning_color();  // amber for warnings
QColor ok_color();       // green for "fits" / "online"
QColor muted_text_color();
QColor card_color();     // background of node cards and panels
// Renders a widget as shown, at 2x for crisp documents, on the card colour (chart exports).
bool save_widget_png(QWidget* widget, const QString& path);
QColor border_color();

}  // namespace meshwork::ui
