#include "ui/error_text.h"

#include <QCoreApplication>

namespace meshwork::ui {

namespace {
QString tr(const char* text) { return QCoreApplication::translate("meshwork::ui::ErrorText", text); }
}  // namespace

QString error_title(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_input: return tr("Invalid input");
    case ErrorKind::does_not_fit: return tr("Does not fit");
    case ErrorKind::io: return tr("File or store error");
    case ErrorKind::remote: return tr("Node error");
    case ErrorKind::internal: return tr("Internal error");
  }
  return tr("Error");
}

QString error_text(const Error& error) {
  QString text = QString::fromStdString(error.message());
  if (error.kind == ErrorKind::internal) text += tr(" (a bug in Meshwork: please report it)");
  return text;
}

QString error_line(const Error& error) { return error_title(error.kind) + QStringLiteral(": ") + error_text(error); }

Error store_unavailable() { return Error{"run store", "", "could not be opened"}.as(ErrorKind::io); }

QString launch_failure_line(const QString& message) { return tr("Launch failed: %1").arg(message); }

}  // namespace meshwork::ui
