// Thin Qt wrappers over core/units.h, so the workbench and the CLI print the same numbers.
#include "ui/format.h"

#include <QStringList>

#include "core/units.h"

namespace meshwork::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

QString format_bytes(double bytes) { return q(meshwork::format_bytes(bytes)); }
QString format_count(double n) { return q(meshwork::format_count(n)); }
QString format_tokens_per_s(double tps) { return q(meshwork::format_tokens_per_s(tps)); }
QString format_seconds(double s) { return q(meshwork::format_seconds(s)); }
QString format_percent(double fraction) { return q(meshwork::format_percent(fraction)); }

QString format_shape(const std::optional<MeshShape>& shape) {
  if (!shape) return QStringLiteral("?");
  QStringList sizes;
  for (Axis a : kAxes) sizes << QString::number((*shape)[a]);
  return sizes.join(QChar(0xD7));
}

}  // namespace meshwork::ui
