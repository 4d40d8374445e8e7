// "Find the straggler": for one step, the slowest and fastest rank of the step time and of each
// axis's collectives, with their times and the mean over ranks. The numbers come from the
// cross-rank aggregates the store keeps at ingest (min / max and the ranks holding them), loaded
// by the monitor's store job (MonitorFrame::stragglers): this view never reads the store.
#pragma once

#include <QTableWidget>

#include "ui/monitor_model.h"

namespace meshwork::ui {

class StragglerTable : public QTableWidget {
  Q_OBJECT
 public:
  explicit StragglerTable(QWidget* parent = nullptr);
  // Rows: step time, then each communicating axis; empty (with a note) when the run has none.
  void show_frame(const MonitorFrame& f);
  int64_t step() const { return step_; }

  // Columns.
  enum Column { kWhat, kSlowestRank, kSlowest, kFastestRank, kFastest, kMean, kColumns };

 private:
  int64_t step_ = -1;
};

}  // namespace meshwork::ui
