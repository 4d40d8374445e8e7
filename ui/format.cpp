// Thin Qt wrappers over core/units.h, so the workbench and the CLI print the same numbers.
#include "ui/format.h"

#include <QStringList>

#include "core/units.h"

namespace meshwork::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }

// One value per axis in kAxes order, joined; `named` puts each axis's name before its value.
// pp is shown only when the shape has stages, before the rest ("pp 2: ..."), as MeshShape::compact.
// A coordinate's stage is not shown here (show_pp false): the views draw and name stages themselves.
QString join_axes(const std::array<int, kAxisCount>& values, const QString& separator, bool named, bool show_pp = true) {
  QStringList parts;
  for (Axis a : kAxes) {
    if (a == Axis::pp) continue;
    const QString v = QString::number(values[axis_index(a)]);
    parts << (named ? axis_label(a) + QLatin1Char(' ') + v : v);
  }
  const int pp = values[axis_index(Axis::pp)];
  return (pp == 1 || !show_pp ? QString() : QStringLiteral("pp %1: ").arg(pp)) + parts.join(separator);
}
}  // namespace

QString format_bytes(double bytes) { return q(meshwork::format_bytes(bytes)); }
QString format_count(double n) { return q(meshwork::format_count(n)); }
QString format_tokens_per_s(double tps) { return q(meshwork::format_tokens_per_s(tps)); }
QString format_seconds(double s) { return q(meshwork::format_seconds(s)); }
QString format_percent(double fraction) { return q(meshwork::format_percent(fraction)); }

QString axis_label(Axis axis) {
  const std::string_view name = axis_name(axis);
  return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

QString format_shape(const std::optional<MeshShape>& shape) {
  return shape ? format_shape(*shape, QString(QChar(0xD7))) : QStringLiteral("?");
}

// ep is not a factor of the world (core/mesh.h): shown after the axes, as MeshShape::compact.
QString format_shape(const MeshShape& shape, const QString& separator) {
  return join_axes(shape.values, separator, false) + (shape.ep > 1 ? QStringLiteral(" · ep %1").arg(shape.ep) : QString());
}

QString format_shape_named(const MeshShape& shape) {
  return join_axes(shape.values, QStringLiteral(" × "), true) + (shape.ep > 1 ? QStringLiteral(" · ep %1").arg(shape.ep) : QString());
}

QString format_coord(const MeshCoord& coord) { return join_axes(coord.values, QString(QChar(0xB7)), false, false); }

QString format_coord_named(const MeshCoord& coord) {
  return join_axes(coord.values, QStringLiteral(" · "), true, false);
}

}  // namespace meshwork::ui
