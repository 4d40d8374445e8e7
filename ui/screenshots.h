// Renders the workbench's main views to PNG files (docs/screenshots/ via scripts/screenshots),
// from demo clusters built in code, so the pictures need no SSH and no GPUs. Runs under the
// offscreen platform or Xvfb; QWidget::grab() gives the same pixels on both.
#pragma once

#include <QString>

namespace meshwork::ui {

// Writes plan.png, cluster.png, plan-dark.png, plan-invalid.png, plan-accelerate.png (a shape
// Accelerate refuses, marked), mesh-64x8.png, mesh-1024x8.png (nodes drawn aggregated) and
// mesh-1024x8-zoom.png (zoomed in to single ranks) into `dir`, then
// the part-2 pictures (render_run_screenshots) into a throw-away run store, never the user's.
// $MESHWORK_SCREENSHOT_RUNS: a directory of recorded metrics files to import for runs/compare.
// Returns 0 on success, 1 (with a message on stderr) on failure.
// `only` = "health": render_health_screenshots alone (with the same throw-away settings and store);
// "experts": render_expert_load_screenshot alone; "runs": render_run_screenshots alone (a real launch);
// "elastic": render_elastic_screenshot alone.
int render_screenshots(const QString& dir, const QString& only = {});

// run-basics.png (the editor with its Run box: the run's name, steps, learning rate and warmup),
// monitor-live.png and monitor-live-dark.png (a real run launched on this machine from the Launch
// action, grabbed mid-run in the light theme, then the dark; skipped when no meshtrain binary is
// found), runs.png and compare.png (the recorded metrics files
// in `runs_data` imported as runs).
int render_run_screenshots(const QString& dir, const QString& runs_data);

// calibration.png: the Cluster view's Calibrate on this machine (a real 2-rank meshtrain
// calibrate), then the calibration view on what it stored; skipped without meshtrain.
int render_calibration_screenshot(const QString& dir);

// straggler-heatmap.png and hang-mesh.png (the Health window) and hang-banner.png (the Monitor's
// banner): a real 4-rank run on this machine, one rank slowed in its compute, then stopped;
// skipped without meshtrain.
int render_health_screenshots(const QString& dir);

// expert-load.png: the Monitor's Expert load card of a real run of a tiny Qwen3-MoE (2 CPU ranks
// on this machine, launched from the Launch action); skipped without meshtrain.
int render_expert_load_screenshot(const QString& dir);

// elastic-replan.png: the Monitor of a real re-planned run from the store
// $MESHWORK_SCREENSHOT_ELASTIC_DB (copied; the ClusterElastic test keeps one with
// $MESHWORK_TEST_KEEP_STORE), its loss chart marked where the shape changed.
int render_elastic_screenshot(const QString& dir);

}  // namespace meshwork::ui
