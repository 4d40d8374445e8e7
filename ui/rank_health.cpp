#include "ui/rank_health.h"

namespace meshwork::ui {

QColor rank_health_color(RankHealth h, bool dark) {
  switch (h) {
    case RankHealth::computing: return dark ? QColor("#2f5d4a") : QColor("#cfe8dc");
    case RankHealth::waiting: return dark ? QColor("#8a6d1d") : QColor("#f5d87a");
    case RankHealth::slow: return dark ? QColor("#9a5a22") : QColor("#f0b27a");
    case RankHealth::culprit: return dark ? QColor("#b3362f") : QColor("#e0584f");
    case RankHealth::unknown: break;
  }
  return dark ? QColor("#3a3f45") : QColor("#e4e7eb");
}

const char* rank_health_name(RankHealth h) {
  switch (h) {
    case RankHealth::computing: return "computing";
    case RankHealth::waiting: return "waiting";
    case RankHealth::slow: return "slow";
    case RankHealth::culprit: return "culprit";
    case RankHealth::unknown: break;
  }
  return "unknown";
}

}  // namespace meshwork::ui
