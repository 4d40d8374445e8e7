// What the workbench tells the user without stopping them: notices (a message box that is shown
// and never waited on) and Help's list of keyboard shortcuts, made from the actions themselves so
// it cannot miss one.
#pragma once

#include <QMessageBox>
#include <QString>
#include <vector>

#include "core/store/run_store.h"

namespace meshwork::ui {

// A non-modal message box named `name` (tests find it by name), deleted when closed. A notice
// without a parent outlives a closing window and keeps the application up until it is read.
QMessageBox* show_notice(QWidget* parent, QMessageBox::Icon icon, const QString& title, const QString& text,
                         const QString& name);

// The words of the notice shown when the workbench quits while it follows `runs`.
QString runs_go_on_text(const std::vector<store::RunId>& runs);

// Help → Keyboard shortcuts: every action of `window` that has a shortcut (its menu text and its
// keys), then the mesh view's keys. HTML, one table.
QString shortcuts_html(const QWidget* window);

}  // namespace meshwork::ui
