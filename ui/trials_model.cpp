#include "ui/trials_model.h"

#include <QBrush>
#include <QFont>

#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
QString signed_percent(const std::optional<double>& p) {
  if (!p) return QStringLiteral("–");
  return QStringLiteral("%1%2 %").arg(*p >= 0 ? QStringLiteral("+") : QString()).arg(*p, 0, 'f', 1);
}
}  // namespace

TrialsModel::TrialsModel(QObject* parent) : QAbstractTableModel(parent) {}

void TrialsModel::set_trial(std::optional<store::Trial> trial) {
  beginResetModel();
  trial_ = std::move(trial);
  endResetModel();
}

int TrialsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !trial_ ? 0 : static_cast<int>(trial_->results.size());
}

int TrialsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TrialsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const store::TrialResult& r = result_at(index.row());
  const int col = index.column();
  const bool winner = trial_->winner() == &r;
  if (role == Qt::FontRole && winner) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ToolTipRole) {
    if (!r.reason.empty()) return QString::fromStdString(r.reason);
    if (col == Predicted || col == EstimatedMemory) return tr("The planner's prediction for this shape");
    return {};
  }
  if (role == Qt::TextAlignmentRole)
    return col == Shape || col == Status ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ForegroundRole) {
    if (col == Status) {
      if (r.status == store::kStatusOk) return QBrush(ok_color());
      if (r.status == store::kStatusFailed || r.status == store::kTrialNotLaunched) return QBrush(error_color());
      if (r.status == store::kStatusStopped) return QBrush(warning_color());
      return QBrush(muted_text_color());
    }
    if (col == Predicted || col == EstimatedMemory || !r.measured()) return QBrush(muted_text_color());
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (col) {
    case Rank: return r.measured() ? QVariant(index.row() + 1) : QVariant(QStringLiteral("–"));
    case Position: return QStringLiteral("#%1").arg(r.position);
    case Shape: return format_shape(r.predicted.shape, QStringLiteral(" × ")) + (winner ? tr("  ★ winner") : QString());
    case Status: {
      const QString status = QString::fromStdString(r.status);
      if (r.reason.empty() || r.status == store::kStatusOk) return status;
      return QStringLiteral("%1: %2").arg(status, QString::fromStdString(r.reason.substr(0, r.reason.find('\n'))));
    }
    case Measured: return r.tokens_per_s ? format_tokens_per_s(*r.tokens_per_s) : QStringLiteral("–");
    case Predicted: return format_tokens_per_s(r.predicted.tokens_per_s);
    case Error: return signed_percent(r.tokens_error_percent());
    case PeakMemory: return r.peak_bytes ? format_bytes(*r.peak_bytes) : QStringLiteral("–");
    case EstimatedMemory: return format_bytes(static_cast<double>(r.predicted.peak_bytes));
    case Run: return r.run ? QVariant(static_cast<qlonglong>(*r.run)) : QVariant(QStringLiteral("–"));
    default: return {};
  }
}

QVariant TrialsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal) return {};
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Rank: return tr("Ranked by measured tokens/s (runs that failed, and shapes without a run, last)");
      case Position: return tr("The planner's rank of the shape");
      case Measured: return tr("Tokens/s of the whole mesh the run measured (the Runs view's number)");
      case Error: return tr("(measured − predicted) / predicted");
      case PeakMemory: return tr("The highest memory peak any rank reported (mem_peak_bytes)");
      case EstimatedMemory: return tr("The planner's per-rank memory at its peak");
      default: return {};
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case Rank: return QStringLiteral("#");
    case Position: return tr("Planned");
    case Shape: return tr("r × s × cp × tp");
    case Status: return tr("Status");
    case Measured: return tr("Measured");
    case Predicted: return tr("Predicted");
    case Error: return tr("Error");
    case PeakMemory: return tr("Peak / rank");
    case EstimatedMemory: return tr("Estimated");
    case Run: return tr("Run");
    default: return {};
  }
}

}  // namespace meshwork::ui
