#include "ui/straggler_table.h"

#include <QHeaderView>

#include "core/mesh.h"
#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

StragglerTable::StragglerTable(QWidget* parent) : QTableWidget(0, kColumns, parent) {
  setObjectName("StragglerTable");
  setHorizontalHeaderLabels({tr("Latest step"), tr("Slowest rank"), tr("time"), tr("Fastest rank"),
                             tr("time"), tr("mean over ranks")});
  verticalHeader()->setVisible(false);
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  horizontalHeader()->setStretchLastSection(true);
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  setSelectionMode(QAbstractItemView::NoSelection);
  setFocusPolicy(Qt::NoFocus);
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  setMaximumHeight(6 * 26 + 28);  // a header and up to five rows: a glance, not a page
  setToolTip(tr("Per step, the rank that took longest and the one that took shortest (from the "
                "store's per-step min and max over all ranks)"));
}

void StragglerTable::show_frame(const MonitorFrame& f) {
  step_ = f.straggler_step;
  setRowCount(static_cast<int>(f.stragglers.size()));
  horizontalHeaderItem(kWhat)->setText(step_ >= 0 ? tr("Step %1").arg(step_) : tr("Latest step"));
  auto cell = [&](int row, int col, const QString& text) {
    auto* item = new QTableWidgetItem(text);
    if (col != kWhat) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    setItem(row, col, item);
  };
  for (int row = 0; row < static_cast<int>(f.stragglers.size()); ++row) {
    const MonitorFrame::Straggler& s = f.stragglers[static_cast<size_t>(row)];
    QString what = tr("step time");
    if (s.axis) what = tr("%1 collectives").arg(axis_label(*s.axis));
    cell(row, kWhat, what);
    if (s.axis) item(row, kWhat)->setForeground(axis_color(*s.axis, is_dark()));
    cell(row, kSlowestRank, tr("rank %1").arg(s.at.max_rank));
    cell(row, kSlowest, format_seconds(s.at.max));
    cell(row, kFastestRank, tr("rank %1").arg(s.at.min_rank));
    cell(row, kFastest, format_seconds(s.at.min));
    cell(row, kMean, tr("%1 (%2 ranks)").arg(format_seconds(s.at.mean)).arg(s.at.ranks));
  }
}

}  // namespace meshwork::ui
