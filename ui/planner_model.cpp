#include "ui/planner_model.h"

#include <QBrush>
#include <QFont>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

PlannerModel::PlannerModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlannerModel::set_rows(std::vector<PlanRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

void PlannerModel::set_current_shape(const MeshShape& shape) {
  if (shape == current_) return;
  current_ = shape;
  if (!rows_.empty()) Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1), {Qt::FontRole});
}

int PlannerModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int PlannerModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant PlannerModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const PlanRow& r = rows_[static_cast<size_t>(index.row())];
  const PlanEntry& e = r.entry;
  const TimeEstimate& t = e.time;
  const int col = index.column();
  if (role == Qt::FontRole && e.shape == current_) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ToolTipRole && (col == Basis || col == TokensPerS || col == StepTime)) {
    QString tip = tr("%1 — %2").arg(QString::fromStdString(time_basis(r)), QString::fromStdString(time_basis_detail(r)));
    if (!r.note.empty()) tip += QStringLiteral("\n") + QString::fromStdString(r.note);
    return tip;
  }
  if (role == Qt::ToolTipRole && !r.note.empty()) return QString::fromStdString(r.note);
  if (role == Qt::TextAlignmentRole)
    return col == Shape || col == Basis ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ForegroundRole && col == Fits) return QBrush(e.fits ? ok_color() : error_color());
  if (role == Qt::ForegroundRole && col == Shape && !e.accelerate_refusal.empty()) return QBrush(warning_color());
  if (role == Qt::ForegroundRole && !e.fits && col != Fits) return QBrush(muted_text_color());
  if (role == Qt::ForegroundRole && col == Basis) {
    const std::string b = time_basis(r);
    // Uncalibrated and partly calibrated in the warning colour: neither is measured in full.
    return QBrush(b.rfind("uncalibrated", 0) == 0 || b.rfind("partly", 0) == 0 ? warning_color() : ok_color());
  }
  if (col >= CommFirst && col < Basis && role == ShareRole) return comm_share(t, kAxes[static_cast<size_t>(col - CommFirst)]);
  if (role == SortRole) {
    switch (col) {
      case Rank: return index.row();
      case Shape: return QString::fromStdString(e.shape.compact());
      case Fits: return e.fits ? 1 : 0;
      case Memory: return double(e.memory.total());
      case TokensPerS: return t.tokens_per_s;
      case Mfu: return t.mfu;
      case StepTime: return t.step_s;
      case Basis: return QString::fromStdString(time_basis(r));
      default: return comm_share(t, kAxes[static_cast<size_t>(col - CommFirst)]);
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (col) {
    case Rank: return index.row() + 1;
    case Shape:
      // Marked, not hidden: meshtrain runs the shape, Accelerate would not (the tooltip says why).
      return e.accelerate_refusal.empty() ? format_shape(e.shape, QStringLiteral(" × "))
                                          : tr("⚠ %1 · not Accelerate").arg(format_shape(e.shape, QStringLiteral(" × ")));
    case Fits: return e.fits ? tr("✓ fits") : tr("✗ no");
    case Memory: return format_bytes(double(e.memory.total()));
    case TokensPerS: return format_tokens_per_s(t.tokens_per_s);
    case Mfu: return format_percent(t.mfu);
    case StepTime:
      return t.step_band > 0 ? tr("%1 ± %2").arg(format_seconds(t.step_s), format_percent(t.step_band))
                             : format_seconds(t.step_s);
    case Basis: return QString::fromStdString(time_basis(r));
    default: return format_percent(comm_share(t, kAxes[static_cast<size_t>(col - CommFirst)]));
  }
}

QVariant PlannerModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal) return {};
  if (role == Qt::ForegroundRole && section >= CommFirst && section < Basis)
    return QBrush(axis_color(kAxes[static_cast<size_t>(section - CommFirst)], is_dark()));
  if (role == Qt::ToolTipRole) {
    if (section == Shape) return tr("dp_replicate × dp_shard × cp × tp");
    if (section == Basis)
      return tr("Where the predicted numbers came from: the cluster's calibration, the time model fitted to "
                "the stored runs of these nodes (judged on runs it did not learn from), or core's uncalibrated "
                "defaults, which %1 replaces (hover a row for each term and its uncertainty)")
          .arg(QString::fromUtf8(kCalibrateAction));
    if (section >= CommFirst && section < Basis)
      return tr("Share of the step held up by %1 collectives (core's estimate; what overlaps compute is not "
                "counted, so the columns add up to meshwork plan's comm)")
          .arg(axis_label(kAxes[static_cast<size_t>(section - CommFirst)]));
    if (section == Mfu) return tr("Model FLOPs utilisation predicted by core");
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case Rank: return "#";
    case Shape: return tr("r × s × cp × tp");
    case Fits: return tr("Fits");
    case Memory: return tr("Mem / rank");
    case TokensPerS: return tr("Throughput");
    case Mfu: return tr("MFU");
    case StepTime: return tr("Step");
    case Basis: return tr("Basis");
    default: {
      // Narrow columns: "dp_replicate" -> "dp_r"; the first one says what the columns are.
      QString name = axis_label(kAxes[static_cast<size_t>(section - CommFirst)]);
      if (const qsizetype cut = name.indexOf(QLatin1Char('_')); cut >= 0) name.truncate(cut + 2);
      return section == CommFirst ? tr("comm %1").arg(name) : name;
    }
  }
}

}  // namespace meshwork::ui
