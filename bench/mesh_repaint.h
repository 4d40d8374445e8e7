// How the Qt benchmarks time the mesh view (scale_views, mesh_redraw_bench): 30 synchronous
// repaints of the view as it stands, best and 95th percentile, with what the view chose to draw
// (its level of detail, the items painted, the zoom), so a fast number is never a view that drew
// less than it should.
#pragma once

#include <QElapsedTimer>
#include <QString>
#include <algorithm>
#include <vector>

#include "ui/mesh_view.h"

namespace meshwork::bench {

inline double ms_since(const QElapsedTimer& t) { return static_cast<double>(t.nsecsElapsed()) / 1e6; }

struct MeshRedraw {
  QString name;
  int nodes = 0, gpus = 0;
  double best_ms = 0, p95_ms = 0;
  int painted = 0;
  QString detail;  // ranks | nodes | blocks
  double zoom = 1;
  bool health = false;     // rank states drawn
  double set_mesh_ms = 0;  // filled by benches that time set_mesh as well
};

inline MeshRedraw time_repaints(ui::MeshView& view, const QString& name, int nodes, int gpus) {
  std::vector<double> v;
  for (int i = 0; i < 30; ++i) {
    QElapsedTimer t;
    t.start();
    view.repaint();
    v.push_back(ms_since(t));
  }
  std::sort(v.begin(), v.end());
  MeshRedraw r;
  r.name = name;
  r.nodes = nodes;
  r.gpus = gpus;
  r.best_ms = v.front();
  r.p95_ms = v[v.size() * 95 / 100];
  r.painted = view.painted_items();
  r.zoom = view.zoom();
  r.health = view.showing_health();
  r.detail = view.detail() == ui::MeshView::Detail::ranks ? "ranks" : view.detail() == ui::MeshView::Detail::nodes ? "nodes" : "blocks";
  return r;
}

}  // namespace meshwork::bench
