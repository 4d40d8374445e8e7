// Numbers as people read them: GiB, tokens/s, ms, percentages. One place, so every panel agrees.
#pragma once

#include <QString>
#include <optional>

#include "core/mesh.h"

namespace meshwork::ui {

QString format_bytes(double bytes);         // "1.5 GiB", "512 MiB"
QString format_tokens_per_s(double tps);    // "12.3k tokens/s"
QString format_seconds(double seconds);     // "850 ms", "1.25 s", "3 min 20 s"
QString format_percent(double fraction);    // 0.417 -> "41.7 %"
QString format_count(double n);            // 8030261248 -> "8.03 B"
// Display forms of a shape and of a rank's coordinates, in kAxes order; never parsed back.
QString axis_label(Axis axis);                                // "dp_replicate"
QString format_shape(const std::optional<MeshShape>& shape);  // "2×2×1×2"; "?" when unknown
QString format_shape(const MeshShape& shape, const QString& separator);  // "2 × 2 × 1 × 2"
QString format_shape_named(const MeshShape& shape);           // "dp_replicate 2 × dp_shard 2 × ..."
QString format_coord(const MeshCoord& coord);                 // "1·0·0·1"
QString format_coord_named(const MeshCoord& coord);           // "dp_replicate 1 · dp_shard 0 · ..."

}  // namespace meshwork::ui
