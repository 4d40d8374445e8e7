// One fixed colour per mesh axis (and per flattened group), used everywhere the workbench shows an
// axis: the mesh view, legends, the inspector, the planner's comm columns and, in part 2, the
// per-axis comm charts and the config diff. Hues come from the Okabe-Ito palette, which stays
// distinguishable for the common forms of colour blindness; the dark theme uses lighter tints of
// the same hues so they keep their contrast on a dark background.
#pragma once

#include <QColor>
#include <QPixmap>
#include <QString>

#include "core/mesh.h"

namespace meshwork::ui {

// Colour of a mesh axis or flattened group in the current theme (see theme.h).
QColor group_color(GroupKind kind, bool dark);
inline QColor axis_color(Axis axis, bool dark) { return group_color(group_of_axis(axis), dark); }

// The colour of group number `index` among `count` groups of `kind`: the axis hue at one of a few
// lightness steps, so neighbouring groups differ while the hue still names the axis.
QColor group_shade(GroupKind kind, int index, int count, bool dark);

// Colours of the memory terms (params, grads, ...). They are not axes, so they use hues the axes
// do not; neutral-ish so the capacity line and the red "does not fit" stand out.
QColor memory_term_color(int term_index, bool dark);

// The colour of run number `index` (Compare's runs, their thumbnails): hues and lightnesses the
// axes do not use, so a run never reads as an axis, each at a contrast of at least 3:1 on the
// theme's chart card. The dark variants are the web view's run colours too
// (resources/web/app.js MW.COLORS, which a test holds to these).
QColor run_color(int index, bool dark);
inline constexpr int kRunColorCount = 10;  // then they repeat

// The monitor's single-run series: the loss (and tokens/s), the learning rate, the gradient norm,
// MFU and the compute layer of the time per step; each readable on the theme's chart card.
enum class MetricSeries { ink, lr, grad_norm, mfu, compute };
QColor metric_color(MetricSeries series, bool dark);
// Rank `r` of `n` in the memory chart: a slate-to-amber ramp (ranks are not axes).
QColor rank_color(int r, int n, bool dark);

// Expert parallel (ep): its own colour, Paul Tol's wine, a hue the axes and runs leave free, so
// the ep groups read as borrowed ranks drawn over the axes' cells.
QColor expert_color(bool dark);

QString group_label(GroupKind kind);  // "dp_shard", "dp (replicate × shard)", ...

// A 12 px rounded square in `color`: the swatch that ties an editor row or a button to its axis.
QPixmap color_swatch(const QColor& color);

}  // namespace meshwork::ui
