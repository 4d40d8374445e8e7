// What a rank is doing, as the Health view's mesh colours it (ui/health_model.h fills it from the
// diagnosis; ui/mesh_view.h paints it).
#pragma once

#include <QColor>

namespace meshwork::ui {

enum class RankHealth : char { unknown, computing, waiting, slow, culprit };

// Fills that read apart in both themes and from the axis hues: calm for computing, amber for
// waiting, red for the culprit, orange-brown for a straggler.
QColor rank_health_color(RankHealth h, bool dark);
const char* rank_health_name(RankHealth h);

}  // namespace meshwork::ui
