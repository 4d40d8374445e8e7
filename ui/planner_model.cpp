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
  const int col = index.column();
  if (role == Qt::FontRole && r.shape == current_) {
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
  if (role == Qt::ForegroundRole && col == Fits) return QBrush(r.fits ? ok_color() : error_color());
  if (role == Qt::ForegroundRole && col == Shape && !r.accelerate_refusal.empty()) return QBrush(warning_color());
  if (role == Qt::ForegroundRole && !r.fits && col != Fits) return QBrush(muted_text_color());
  if (role == Qt::ForegroundRole && col == Basis) {
    const std::string b = time_basis(r);
    return QBrush(b == "defaults" ? muted_text_color() : (b.rfind("partly", 0) == 0 ? warning_color() : ok_color()));
  }
  if (col >= CommFirst && col < Basis && role == ShareRole) return r.comm_share[kAxes[static_cast<size_t>(col - CommFirst)]];
  if (role == SortRole) {
    switch (col) {
      case Rank: return index.row();
      case Shape: return QString::fromStdString(r.shape.compact());
      case Fits: return r.fits ? 1 : 0;
      case Memory: return r.memory_bytes;
      case TokensPerS: return r.tokens_per_s;
      case Mfu: return r.mfu;
      case StepTime: return r.step_seconds;
      case Basis: return QString::fromStdString(time_basis(r));
      default: return r.comm_share[kAxes[static_cast<size_t>(col - CommFirst)]];
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (col) {
    case Rank: return index.row() + 1;
    case Shape:
      // Marked, not hidden: meshtrain runs the shape, Accelerate would not (the tooltip says why).
      return r.accelerate_refusal.empty() ? format_shape(r.shape, QStringLiteral(" × "))
                                          : tr("⚠ %1 · not Accelerate").arg(format_shape(r.shape, QStringLiteral(" × ")));
    case Fits: return r.fits ? tr("✓ fits") : tr("✗ no");
    case Memory: return format_bytes(r.memory_bytes);
    case TokensPerS: return format_tokens_per_s(r.tokens_per_s);
    case Mfu: return format_percent(r.mfu);
    case StepTime:
      return r.step_band > 0 ? tr("%1 ± %2").arg(format_seconds(r.step_seconds), format_percent(r.step_band))
                             : format_seconds(r.step_seconds);
    case Basis: return QString::fromStdString(time_basis(r));
    default: return format_percent(r.comm_share[kAxes[static_cast<size_t>(col - CommFirst)]]);
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
                "the stored runs of these nodes, or core's defaults (hover a row for each term)");
    if (section >= CommFirst && section < Basis)
      return tr("Share of the step spent in %1 collectives (core's estimate)")
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
