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
// The display form of a shape, "2×2×1×2" (kAxes order); "?" when unknown. Never parsed back.
QString format_shape(const std::optional<MeshShape>& shape);

}  // namespace meshwork::ui
