// The planner's ranked shapes as a Qt table model (one row per shape, best first). Sorting and
// display live in the view; the model holds core's rows and the formatted cells. The last column
// says, per shape, whether its predicted numbers are calibrated, fitted to stored runs or core's
// defaults.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "ui/core_bridge.h"

namespace meshwork::ui {

class PlannerModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // Basis: where the row's step time came from (core_bridge's time_basis: "calibrated",
  // "fitted to 4 runs", "calibrated + fitted to 4 runs", "defaults", ...); its tooltip, and the
  // throughput's and step's, say it term by term.
  enum Column { Rank, Shape, Fits, Memory, TokensPerS, Mfu, StepTime, CommFirst,
                Basis = CommFirst + kAxisCount, ColumnCount };
  static constexpr int SortRole = Qt::UserRole + 1;  // raw numbers for sorting
  static constexpr int ShareRole = Qt::UserRole + 2; // comm share 0..1 for the bar delegate

  explicit PlannerModel(QObject* parent = nullptr);
  void set_rows(std::vector<PlanRow> rows);
  void set_current_shape(const MeshShape& shape);  // shown bold
  const PlanRow& row_at(int row) const { return rows_.at(static_cast<size_t>(row)); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<PlanRow> rows_;
  MeshShape current_;
};

}  // namespace meshwork::ui
