// A trial group (core/store/trials.h) as a Qt table: one row per shape tried, ranked as the store
// ranks them (measured tokens/s, highest first; failed and never launched shapes last), with the
// planner's prediction beside what the run measured. The winner's row is bold.
#pragma once

#include <QAbstractTableModel>
#include <optional>

#include "core/store/trials.h"

namespace meshwork::ui {

class TrialsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Rank, Position, Shape, Status, Measured, Predicted, Error, PeakMemory, EstimatedMemory, Run,
                ColumnCount };

  explicit TrialsModel(QObject* parent = nullptr);
  void set_trial(std::optional<store::Trial> trial);  // unset: empty
  const std::optional<store::Trial>& trial() const { return trial_; }
  const store::TrialResult& result_at(int row) const { return trial_->results.at(static_cast<size_t>(row)); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::optional<store::Trial> trial_;
};

}  // namespace meshwork::ui
