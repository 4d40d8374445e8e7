#include "ui/notices.h"

#include <QAction>
#include <QKeySequence>
#include <QSet>
#include <QWidget>

#include "ui/mesh_view.h"

namespace meshwork::ui {

QMessageBox* show_notice(QWidget* parent, QMessageBox::Icon icon, const QString& title, const QString& text,
                         const QString& name) {
  auto* box = new QMessageBox(icon, title, text, QMessageBox::Ok, parent);
  box->setObjectName(name);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setWindowModality(Qt::NonModal);
  box->setTextInteractionFlags(Qt::TextSelectableByMouse);
  box->show();
  return box;
}

QString runs_go_on_text(const std::vector<store::RunId>& runs) {
  QStringList ids;
  for (store::RunId id : runs) ids << QString::number(id);
  const QString which = runs.size() == 1 ? QObject::tr("Run %1 goes on").arg(ids.front())
                                         : QObject::tr("Runs %1 go on").arg(ids.join(QStringLiteral(", ")));
  return QObject::tr("%1 without the workbench: the ranks keep training and recording. The next start of the "
                     "workbench follows %2 again; to end %2 now, use Stop run in Runs or `meshwork stop %3`.")
      .arg(which, runs.size() == 1 ? QObject::tr("it") : QObject::tr("them"), ids.front());
}

QString shortcuts_html(const QWidget* window) {
  QString rows;
  QSet<QString> seen;
  const auto row = [&rows](const QString& keys, const QString& what) {
    rows += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>").arg(keys.toHtmlEscaped(), what.toHtmlEscaped());
  };
  for (const QAction* a : window->findChildren<QAction*>()) {
    for (const QKeySequence& k : a->shortcuts()) {
      const QString keys = k.toString(QKeySequence::NativeText);
      if (keys.isEmpty() || seen.contains(keys)) continue;
      seen.insert(keys);
      QString what = a->text().remove('&');
      if (what.endsWith(QChar(0x2026))) what.chop(1);
      row(keys, what);
    }
  }
  for (const auto& [keys, what] : MeshView::keys()) row(keys, what);
  return QStringLiteral("<table cellspacing=4>%1</table>").arg(rows);
}

}  // namespace meshwork::ui
