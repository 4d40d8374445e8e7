// Renders the workbench's main views to PNG files (docs/screenshots/ via scripts/screenshots),
// from demo clusters built in code, so the pictures need no SSH and no GPUs. Runs under the
// offscreen platform or Xvfb; QWidget::grab() gives the same pixels on both.
#pragma once

#include <QString>

namespace meshwork::ui {

// Writes cluster.png, plan.png, plan-dark.png, plan-invalid.png, mesh-64x8.png into `dir`.
// Returns 0 on success, 1 (with a message on stderr) on failure.
int render_screenshots(const QString& dir);

}  // namespace meshwork::ui
