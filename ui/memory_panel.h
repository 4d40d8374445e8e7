// Per-rank memory as one stacked bar of core's breakdown (params, grads, optimizer, activations,
// buffers, reserve) against the device's capacity line. Red, with the breaking term named, when it
// does not fit. Custom painted; it only shows what core estimated. Next to core's step time and
// tokens/s, a tag says where those numbers came from: "calibrated" (a stored calibration of these
// nodes gave the compute rate and every collective's fit), "partly calibrated" or "defaults"
// (core's hardware constants), with "+ fitted to N runs" ("fitted to N runs" on the defaults) when
// the time model fitted to the stored runs of these nodes corrected the step; hovering it says
// which terms, which calibration and how well the fit agreed with the runs.
#pragma once

#include <QWidget>
#include <optional>

#include "ui/core_bridge.h"

namespace meshwork::ui {

class MemoryPanel : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryPanel(QWidget* parent = nullptr);
  void set_breakdown(const std::optional<MemoryEstimate>& breakdown, const QString& error,
                     const QString& device_name);
  const std::optional<MemoryEstimate>& breakdown() const { return breakdown_; }
  // When core rejects the shape the estimate is still shown, but marked as about an invalid shape.
  void set_shape_valid(bool valid) { shape_valid_ = valid; update(); }
  // The headline as shown, e.g. "Does not fit: ..." (tests read it).
  QString headline() const;
  bool shows_red() const { return breakdown_ && !breakdown_->fits; }
  // The tag next to the step time ("calibrated", "partly calibrated", "defaults", each possibly
  // with " + fitted to N runs", or "fitted to N runs"; empty while there is no time estimate) and
  // its tooltip (tests read them).
  QString time_basis() const;
  QString time_basis_detail() const;

  QSize sizeHint() const override { return {640, 118}; }
  QSize minimumSizeHint() const override { return {300, 110}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;

 private:
  std::optional<MemoryEstimate> breakdown_;
  QString error_;
  QString device_name_;
  bool shape_valid_ = true;
  std::vector<QRectF> segments_;  // last painted segment rects, for tooltips
  QRectF basis_rect_;             // last painted time-basis tag, for its tooltip
};

}  // namespace meshwork::ui
